"""Orbax checkpoints of the whole training state, with metadata checks.

A checkpoint directory holds one sub-directory per saved update step. Each
step stores two items:

* `state`: the complete `anakin.TrainState` pytree (params, optimizer state,
  replay buffer, self-play lanes, RNG key, counters) of device 0, so a resumed
  run continues exactly where the saved one stopped;
* `meta`: JSON with the config, the env id and version, the package version
  and the step.

Restoring checks the metadata against what the caller expects, and that
every floating-point array is finite, and raises a `CheckpointError` (a
ValueError) that names the path, never silently falling back to fresh
weights.
"""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Tuple

import jax
import numpy as np
import orbax.checkpoint as ocp

import anakin_mz


class CheckpointError(ValueError):
  """A checkpoint is missing, unreadable, or does not fit the request."""


def _manager(directory: str, create: bool, max_to_keep: Optional[int] = 3) -> ocp.CheckpointManager:
  directory = os.path.abspath(directory)
  options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=create)
  return ocp.CheckpointManager(directory, options=options, item_names=("state", "meta"))


def make_metadata(
  config_dict: Dict[str, object], env_id: str, env_version: int, step: int
) -> Dict[str, object]:
  """The JSON metadata saved beside the state."""
  return {
    "config": config_dict,
    "env_id": env_id,
    "env_version": env_version,
    "step": int(step),
    "anakin_mz_version": anakin_mz.__version__,
  }


def save(directory: str, step: int, state, meta: Dict[str, object]) -> None:
  """Saves `state` (a host pytree of arrays) and `meta` at `step`; blocks
  until written. Refuses a state with non-finite values."""
  bad = nonfinite_leaves(state)
  if bad:
    raise CheckpointError(
      f"refusing to save step {step} to {directory!r}: non-finite values in {', '.join(bad[:3])}"
    )
  try:
    mngr = _manager(directory, create=True)
  except OSError as e:
    raise CheckpointError(f"cannot write checkpoints to {directory!r}: {e}") from None
  mngr.save(
    step,
    args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
    force=True,
  )
  mngr.wait_until_finished()
  mngr.close()


def steps(directory: str) -> Tuple[int, ...]:
  """The saved steps in `directory`, ascending (empty if none)."""
  if not os.path.isdir(directory):
    return ()
  return tuple(sorted(_manager(directory, create=False).all_steps()))


def _resolve(directory: str, step: Optional[int]) -> int:
  if not os.path.exists(directory):
    raise CheckpointError(f"checkpoint directory {directory!r} does not exist")
  if not os.path.isdir(directory):
    raise CheckpointError(f"checkpoint path {directory!r} is not a directory")
  available = steps(directory)
  if not available:
    raise CheckpointError(f"no checkpoints found in {directory!r}")
  if step is None:
    return available[-1]
  if step not in available:
    raise CheckpointError(
      f"step {step} is not in {directory!r}; saved steps: {', '.join(map(str, available))}"
    )
  return step


def load_metadata(directory: str, step: Optional[int] = None) -> Dict[str, object]:
  """The metadata of `step` (default: the latest) in `directory`."""
  step = _resolve(directory, step)
  mngr = _manager(directory, create=False)
  try:
    out = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
  except Exception as e:  # orbax raises many types for unreadable data
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} has unreadable metadata: {type(e).__name__}: {e}"
    ) from None
  finally:
    mngr.close()
  meta = dict(out["meta"])
  for key in ("config", "env_id", "env_version", "step"):
    if key not in meta:
      raise CheckpointError(
        f"checkpoint {directory!r} step {step}: metadata "
        f"lacks {key!r}; not an anakin-mz checkpoint?"
      )
  return meta


def check_compatible(
  meta: Dict[str, object], directory: str, *, env_id: str, env_version: int
) -> None:
  """Raises CheckpointError if the checkpoint is for another env/version."""
  if meta["env_id"] != env_id:
    raise CheckpointError(f"checkpoint {directory!r} is for env {meta['env_id']!r}, not {env_id!r}")
  if meta["env_version"] != env_version:
    raise CheckpointError(
      f"checkpoint {directory!r} is for {env_id} version {meta['env_version']}; "
      f"this code has version {env_version}"
    )


def restore(
  directory: str, template, step: Optional[int] = None
) -> Tuple[object, Dict[str, object]]:
  """Restores the state saved at `step` (default: latest) into the structure
  and shapes of `template`. Returns (state, metadata).

  Raises:
    CheckpointError: missing path or step, unreadable data, or a saved state
      whose structure or shapes differ from `template` (another network or
      config).
  """
  step = _resolve(directory, step)
  meta = load_metadata(directory, step)
  abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
  mngr = _manager(directory, create=False)
  try:
    out = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore(abstract)))
  except Exception as e:
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} does not fit this network/config "
      f"or is corrupt: {type(e).__name__}: {str(e)[:500]}"
    ) from None
  finally:
    mngr.close()
  state = out["state"]
  for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(template)):
    if got.shape != want.shape or got.dtype != want.dtype:
      raise CheckpointError(
        f"checkpoint {directory!r} step {step} has an array of shape "
        f"{got.shape} {got.dtype} where this config expects {want.shape} "
        f"{want.dtype}: another network or config"
      )
  bad = nonfinite_leaves(state)
  if bad:
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} holds non-finite values (NaN or "
      f"inf) in {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}: a diverged "
      "run; use an earlier step"
    )
  return state, meta


def nonfinite_leaves(tree) -> List[str]:
  """The paths of the floating-point leaves of `tree` that hold NaN or inf."""
  out = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
    leaf = np.asarray(leaf)
    if np.issubdtype(leaf.dtype, np.inexact) and not np.all(np.isfinite(leaf)):
      out.append(jax.tree_util.keystr(path))
  return out
