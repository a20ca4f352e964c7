"""Orbax checkpoints of the whole training state, with metadata checks.

A checkpoint directory holds one sub-directory per saved update step. Each
step stores two items:

* `state`: the learner's complete state pytree (`anakin.TrainState`: params,
  optimizer state, replay buffer, self-play lanes, RNG key, counters) as
  global arrays, so a
  resumed run continues exactly where the saved one stopped. Orbax writes
  each device's shards (each host its own, multi-host); `restore` into a
  template with shardings (`OnMesh.abstract_state`) lays the state out on
  the restoring run's devices, so a state saved on N devices resumes on M;
* `meta`: JSON with the config, the env id and version, the package version,
  the step and `state_layout` ("global", today's format); the run loop adds
  the device count it ran on (for information).

Reading checks the format (`check_format`): a checkpoint of an older one
(the earlier `pmap` run loop's, whose state held a leading device axis and
whose metadata no `state_layout`; a config saved in an older layout) is
refused with one line naming `anakin-mz migrate`, which converts it once
(`runtime.migrate`, the one place that reads the older formats).

Restoring checks the metadata against what the caller expects, and that
every floating-point array is finite, and raises a `CheckpointError` (a
ValueError) that names the path, never silently falling back to fresh
weights. Resuming (`restore_latest_readable`) alone falls back, to the newest
step that reads back whole, with one warning line.

A save writes into a temporary directory that Orbax renames when complete,
so a save that fails part-way (a full disk) leaves the steps saved before it
as they were: `save` removes the partial step and raises a CheckpointError
that says so.
"""

from __future__ import annotations

import glob
import logging
import os
import pathlib
import shutil
import sys
from typing import Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp

import anakin_mz
from anakin_mz import config as config_lib


STATE_LAYOUT = "global"


class CheckpointError(ValueError):
  """A checkpoint is missing, unreadable, or does not fit the request."""


def older_format(path: str, why: str) -> CheckpointError:
  """The one-line error for a checkpoint or model file `path` in an older
  format (`why`), naming the tool that converts it."""
  return CheckpointError(
    f"{path!r} is in an older format ({why}); convert it once with "
    f"`anakin-mz migrate {path}`, then run this again"
  )


def saved_config(raw: object, what: str, path: str) -> "config_lib.Config":
  """The `Config` saved with a checkpoint or model file (`what` names it in
  messages: "checkpoint", "model file"; `path` is where it is).

  Raises:
    CheckpointError: a config of an older layout (`older_format`, naming
      `anakin-mz migrate`) or one this code rejects.
  """
  try:
    return config_lib.from_saved(raw)  # type: ignore[arg-type]
  except config_lib.OlderLayout as e:
    raise older_format(path, str(e)) from None
  except ValueError as e:
    raise CheckpointError(f"{what} {path!r} holds a config this code rejects: {e}") from None


def check_format(meta: Dict[str, object], directory: str) -> None:
  """Raises CheckpointError (`older_format`) unless the checkpoint's
  metadata says today's format: the state as global arrays
  (`state_layout`, which `make_metadata` writes)."""
  layout = meta.get("state_layout")
  if layout != STATE_LAYOUT:
    raise older_format(directory, f"state layout {layout!r}, this version reads {STATE_LAYOUT!r}")


def _manager(directory: str, create: bool, max_to_keep: Optional[int] = 3) -> ocp.CheckpointManager:
  directory = os.path.abspath(directory)
  # Synchronous: `save` blocks anyway, and a failed save then has no
  # background thread still writing when its partial step is removed.
  options = ocp.CheckpointManagerOptions(
    max_to_keep=max_to_keep, create=create, enable_async_checkpointing=False
  )
  # Opening the directory, Orbax logs an absl ERROR line for each step whose
  # own bookkeeping file (`_CHECKPOINT_METADATA`, a timestamp) does not
  # parse, every time: noise beside the one-line CheckpointError a read of
  # a corrupt step raises here.
  absl = logging.getLogger("absl")
  level = absl.level
  absl.setLevel(logging.CRITICAL)
  try:
    return ocp.CheckpointManager(directory, options=options, item_names=("state", "meta"))
  finally:
    absl.setLevel(level)


def _reason(e: Exception) -> str:
  """One short line of what Orbax raised: TensorStore's errors run to
  hundreds of characters over several lines (a chain of drivers, then the
  JSON spec); the status code and the last clause say what is wrong."""
  text = " ".join(str(e).split())
  if "[tensorstore_spec" in text:
    text = text.split(" [tensorstore_spec")[0]
    code, _, rest = text.partition(": ")
    text = f"{code}: {rest.rsplit(': ', 1)[-1]}" if rest else code
  if len(text) > 200:
    text = text[:197] + "..."
  return f"{type(e).__name__}: {text}"


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
    "state_layout": STATE_LAYOUT,
  }


def save(
  directory: str, step: int, state, meta: Dict[str, object], max_to_keep: Optional[int] = 3
) -> None:
  """Saves `state` (a pytree of host arrays or of global `jax.Array`s, sharded
  or not) and `meta` at `step`; blocks until written, then keeps the newest
  `max_to_keep` steps (None: all). Refuses a state with non-finite values."""
  bad = nonfinite_leaves(state)
  if bad:
    raise CheckpointError(
      f"refusing to save step {step} to {directory!r}: non-finite values in {', '.join(bad[:3])}"
    )
  try:
    mngr = _manager(directory, create=True, max_to_keep=max_to_keep)
  except OSError as e:
    raise CheckpointError(f"cannot write checkpoints to {directory!r}: {e}") from None
  try:
    mngr.save(
      step,
      args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)),
      force=True,
    )
    mngr.wait_until_finished()
  except Exception as e:  # OSError (a full disk), or what Orbax and TensorStore wrap it in
    try:
      mngr.close()
    except Exception:  # the failed save's threads may fail again: the error is above
      pass
    for partial in glob.glob(
      os.path.join(os.path.abspath(directory), f"{step}.orbax-checkpoint-tmp*")
    ):
      shutil.rmtree(partial, ignore_errors=True)
    earlier = [s for s in steps(directory) if s != step]
    kept = f"steps {', '.join(map(str, earlier))} are intact" if earlier else "no step was saved"
    raise CheckpointError(
      f"cannot save step {step} to {directory!r}: {type(e).__name__}: {e}; "
      f"the checkpoints saved before it are untouched ({kept})"
    ) from None
  mngr.close()


def _saved_steps(directory: str) -> Tuple[int, ...]:
  if not os.path.isdir(directory):
    return ()
  return tuple(sorted(_manager(directory, create=False).all_steps()))


def locate(directory: str) -> str:
  """The checkpoint directory a user's path names: the path itself, or,
  where it holds no checkpoint but its `checkpoints` sub-directory does (a
  run's logdir, `runs/nannon` for `runs/nannon/checkpoints`), that. Every
  reader here goes through it, so every tool that takes a checkpoint
  accepts a logdir."""
  inner = os.path.join(directory, "checkpoints")
  if not _saved_steps(directory) and _saved_steps(inner):
    return inner
  return directory


def steps(directory: str) -> Tuple[int, ...]:
  """The saved steps in `directory` (or the logdir's checkpoints, `locate`),
  ascending (empty if none)."""
  return _saved_steps(locate(directory))


def _resolve(directory: str, step: Optional[int]) -> int:
  """The step of `directory` (already `locate`d) to read: `step`, or the
  latest."""
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
  """The metadata of `step` (default: the latest) in `directory` (or the
  logdir's checkpoints, `locate`)."""
  directory = locate(directory)
  step = _resolve(directory, step)
  mngr = _manager(directory, create=False)
  try:
    out = mngr.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
  except Exception as e:  # orbax raises many types for unreadable data
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} has unreadable metadata: {_reason(e)}"
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
      f"this code has version {env_version} (the game's rules or observation "
      "changed: retrain, or use the code it was trained with)"
    )


def restore(
  directory: str, template, step: Optional[int] = None
) -> Tuple[object, Dict[str, object]]:
  """Restores the state saved at `step` (default: latest) into the structure
  and shapes of `template` (arrays or `jax.ShapeDtypeStruct`s; where these
  carry a sharding, the arrays come back laid out that way, whatever the
  devices they were saved from). Returns (state, metadata).

  Raises:
    CheckpointError: missing path or step, unreadable data, or a saved state
      whose structure or shapes differ from `template` (another network or
      config).
  """
  directory = locate(directory)
  step = _resolve(directory, step)
  meta = load_metadata(directory, step)
  abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, template)
  state = _read(directory, step, ocp.args.StandardRestore(abstract))
  return _checked(directory, step, state, template), meta


def restore_params(
  directory: str, template, step: Optional[int] = None
) -> Tuple[object, Dict[str, object]]:
  """`restore` of the saved state's `params` alone, into `template` (their
  shapes, dtypes and shardings): Orbax reads that sub-tree only, so the
  caller needs no template of the rest of the state (the learner's). For
  evaluation (`restore.load_agent`). Raises as `restore`."""
  return restore_field(directory, "params", template, step)


def restore_field(
  directory: str, field: str, template, step: Optional[int] = None
) -> Tuple[object, Dict[str, object]]:
  """`restore` of one field of the saved state (`params`, `buffer`, ...)
  alone, into `template`: Orbax reads that sub-tree only. Raises as
  `restore`."""
  directory = locate(directory)
  step = _resolve(directory, step)
  meta = load_metadata(directory, step)
  abstract = {field: jax.tree.map(ocp.utils.to_shape_dtype_struct, template)}
  args = ocp.args.PyTreeRestore(
    item=abstract,
    restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
    partial_restore=True,
  )
  value = _read(directory, step, args)[field]
  return _checked(directory, step, value, template), meta


def read_saved(directory: str, step: int):
  """The state saved at `step` as it was written, with no template: nested
  dicts of numpy arrays (`runtime.migrate` reads an older format with it).
  Raises CheckpointError where it does not read back."""
  directory = locate(directory)
  step = _resolve(directory, step)
  try:
    saved = ocp.PyTreeCheckpointHandler().metadata(pathlib.Path(directory) / str(step) / "state")
  except Exception as e:  # orbax raises many types for unreadable data
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} is unreadable: {_reason(e)}"
    ) from None
  # As numpy, not on the devices the arrays were saved from (which this
  # machine may not have).
  as_numpy = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), saved.tree)
  return _read(directory, step, ocp.args.PyTreeRestore(restore_args=as_numpy))


def _read(directory: str, step: int, args):
  """The `state` item of `step`, read with Orbax restore `args`."""
  mngr = _manager(directory, create=False)
  try:
    return mngr.restore(step, args=ocp.args.Composite(state=args))["state"]
  except Exception as e:
    raise CheckpointError(
      f"checkpoint {directory!r} step {step} is unreadable: corrupt or incomplete, or it "
      f"does not fit this network/config ({_reason(e)})"
    ) from None
  finally:
    mngr.close()


def _checked(directory: str, step: int, state, template):
  """`state` as read, refused where its shapes differ from `template`'s or
  it holds non-finite values."""
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
  return state


def _warn(line: str) -> None:
  print(f"warning: {line}", file=sys.stderr, flush=True)


def restore_latest_readable(
  directory: str,
  template,
  check: Callable[[Dict[str, object]], None] = lambda meta: None,
  warn: Callable[[str], None] = _warn,
) -> Tuple[object, Dict[str, object]]:
  """`restore` of the newest step of `directory` that reads back whole, for
  resuming a run: newer steps that do not (unreadable metadata or arrays,
  corrupt or non-finite) are skipped, with one `warn` line naming them, and
  moved aside (to `<step>.unreadable`) so the run can save those steps
  again. `check(meta)` vets each step's metadata before its state is read;
  what it raises (another env or config) is an error, not skipped.

  Raises:
    CheckpointError: no step reads back (each one's reason), or a missing
      directory.
  """
  directory = locate(directory)
  available = steps(directory)
  if not available:
    _resolve(directory, None)  # the error for a missing or empty directory
  skipped: List[Tuple[int, str]] = []
  for step in reversed(available):
    try:
      meta = load_metadata(directory, step)
    except CheckpointError as e:
      skipped.append((step, str(e)))
      continue
    check(meta)  # another env or config: an error, whatever the older steps hold
    try:
      state, meta = restore(directory, template, step)
    except CheckpointError as e:
      skipped.append((step, str(e)))
      continue
    if skipped:
      why = " ".join(skipped[0][1].split())[:300]
      warn(
        f"checkpoint step(s) {', '.join(str(s) for s, _ in skipped)} in {directory!r} "
        f"cannot be read ({why}); resuming from step {step}, the newest readable one, "
        "and keeping the unreadable ones as <step>.unreadable"
      )
      for s, _ in skipped:
        path = os.path.join(directory, str(s))
        os.replace(path, f"{path}.unreadable")
    return state, meta
  raise CheckpointError(
    f"no checkpoint in {directory!r} can be read: "
    + "; ".join(f"step {s}: {' '.join(why.split())[:200]}" for s, why in skipped)
  )


@jax.jit
def _all_finite(leaves):
  return [jnp.all(jnp.isfinite(x)) for x in leaves]


def nonfinite_leaves(tree) -> List[str]:
  """The paths of the floating-point leaves of `tree` that hold NaN or inf.
  Device arrays are checked where they live (no copy to the host, and it
  works for arrays spread over hosts)."""
  bad, device = {}, []
  for i, (path, leaf) in enumerate(jax.tree_util.tree_flatten_with_path(tree)[0]):
    if not np.issubdtype(np.dtype(leaf.dtype), np.inexact):
      continue
    if isinstance(leaf, jax.Array):
      device.append((i, path, leaf))
    elif not np.all(np.isfinite(np.asarray(leaf))):
      bad[i] = path
  if device:
    finite = jax.device_get(_all_finite([leaf for _, _, leaf in device]))
    bad.update({i: path for (i, path, _), ok in zip(device, finite) if not ok})
  return [jax.tree_util.keystr(bad[i]) for i in sorted(bad)]
