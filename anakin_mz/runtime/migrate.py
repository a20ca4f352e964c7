"""`anakin-mz migrate`: checkpoints and model files of older formats,
converted once to today's. The one module that knows the older formats of
checkpoints and model files (the older layouts of the configs saved in them
are `config.legacy`'s); the load path reads today's formats only and,
meeting an older one, raises `checkpoint.older_format`, naming this tool.

What is converted:

* a checkpoint of the earlier `pmap` run loop (`num_devices` in its
  metadata, no `state_layout`): every array held a leading axis of the
  devices. Each step becomes today's global layout holding device 0's
  state: the params and optimizer state were the same on every device
  (bit-identical after), and device 0's replay and self-play lanes with the
  per-device `num_envs` and `batch_size` its config held are a whole run's
  state; the other devices' lanes are dropped. Without `num_devices` (no
  layout marker at all) the state is kept as it is.
* a config saved in a checkpoint's metadata or a model file in an older
  layout (`config.legacy.upgrade_saved`).
* a model file without `agent_kind` (written before it existed, it played
  the search): it names "search".

In place by default, so the command that named the path runs again as it
was: the converted copy is written beside it first, then the original moves
to `<path>.pre-migrate` (kept, never deleted) and the copy takes its name.
With `out` the copy is written there and the original is left as it is. A
path already in today's format is left alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from typing import Dict, List, Optional, Tuple

import jax
import numpy as np
from flax import serialization

from anakin_mz.config import legacy
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export
from anakin_mz.core import players

KEPT_SUFFIX = ".pre-migrate"


@dataclasses.dataclass(frozen=True)
class Migration:
  """What `migrate` did.

  Attributes:
    path: the checkpoint directory or model file read.
    out: where today's format was written ("" where nothing was: `changes`
      is empty).
    changes: one line per conversion, empty where `path` was in today's
      format already.
    kept: where the original now is (in place), or "".
  """

  path: str
  out: str
  changes: Tuple[str, ...]
  kept: str = ""


def migrate(path: str, out: Optional[str] = None) -> Migration:
  """Converts the checkpoint directory (or a run's logdir) or model file
  `path` to today's format: in place, the original kept as
  `<path>.pre-migrate`, or to `out`, the original untouched (module doc).

  Raises:
    CheckpointError: a missing or unreadable path, a path that is neither,
      an `out` or `<path>.pre-migrate` that exists already, or an older
      format this code cannot convert (each names the path).
  """
  if out is not None and os.path.exists(out):
    raise ckpt.CheckpointError(f"{out!r} exists; migrate writes a new path, name another")
  model_file = export.resolve(path)
  if model_file is not None:
    if model_file != path:
      raise ckpt.CheckpointError(
        f"{path!r} is a shipped model's name: shipped models are in today's format already"
      )
    return _migrate_model_file(path, out)
  if not os.path.isdir(path):
    raise ckpt.CheckpointError(f"{path!r} is neither a checkpoint directory nor a model file")
  return _migrate_checkpoint(ckpt.locate(path), out)


def _target(path: str, out: Optional[str]) -> Tuple[str, str]:
  """(where to write, where the original goes: "" for `out`)."""
  if out is not None:
    return out, ""
  kept = path.rstrip(os.sep) + KEPT_SUFFIX
  if os.path.exists(kept):
    raise ckpt.CheckpointError(
      f"{kept!r} exists (an earlier migration's original?): move it away, or pass --out"
    )
  return path.rstrip(os.sep) + ".migrating", kept


def _swap(path: str, written: str, kept: str) -> None:
  """In place: the original to `kept`, the converted copy to `path`."""
  os.replace(path, kept)
  os.replace(written, path)


def _migrate_model_file(path: str, out: Optional[str]) -> Migration:
  doc = export.read_document(path)
  changes: List[str] = []
  if "agent_kind" not in doc:
    doc["agent_kind"] = players.DEFAULT_PLAYER
    changes.append("agent_kind search added (the player of a file without one)")
  config, notes = _upgrade_config(json.loads(doc["config"]), path)
  if notes:
    doc["config"] = json.dumps(config, sort_keys=True)
    changes += notes
  if not changes:
    return Migration(path=path, out="", changes=())
  target, kept = _target(path, out)
  os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
  with open(target, "wb") as f:
    f.write(serialization.msgpack_serialize(doc))  # the params' arrays as read
  try:
    export.read(target)  # today's format now: reads without an error
  except ckpt.CheckpointError:
    os.remove(target)
    raise
  if kept:
    _swap(path, target, kept)
    target = path
  return Migration(path=path, out=target, changes=tuple(changes), kept=kept)


def _upgrade_config(raw: Dict[str, object], path: str) -> Tuple[Dict[str, object], List[str]]:
  try:
    config, notes = legacy.upgrade_saved(raw)
  except ValueError as e:
    raise ckpt.CheckpointError(f"{path!r}: its config does not convert: {e}") from None
  return dict(config), notes


def _checkpoint_changes(meta: Dict[str, object], directory: str):
  """(today's metadata, whether the state drops a leading device axis, the
  changes), for one step's `meta`."""
  changes: List[str] = []
  new = dict(meta)
  pmap = False
  if meta.get("state_layout") != ckpt.STATE_LAYOUT:
    if "state_layout" in meta:
      raise ckpt.CheckpointError(
        f"checkpoint {directory!r} has state layout {meta['state_layout']!r}, which "
        f"migrate does not know; this version reads {ckpt.STATE_LAYOUT!r}"
      )
    pmap = "num_devices" in meta
    if pmap:
      changes.append(
        f"the pmap run loop's layout (a leading axis of {meta['num_devices']} devices) "
        "to global arrays, device 0's state kept"
      )
      new["migrated_from"] = f"pmap run loop on {meta['num_devices']} devices: device 0's state"
      new["num_devices"] = 1
    else:
      changes.append("state_layout marked global")
    new["state_layout"] = ckpt.STATE_LAYOUT
  config, notes = _upgrade_config(meta["config"], directory)  # type: ignore[arg-type]
  new["config"] = config
  return new, pmap, changes + notes


def _migrate_checkpoint(directory: str, out: Optional[str]) -> Migration:
  steps = ckpt.steps(directory)
  if not steps:
    ckpt.load_metadata(directory)  # the error for an empty or unreadable directory
  plans = {}
  for step in steps:
    meta = ckpt.load_metadata(directory, step)
    plans[step] = _checkpoint_changes(meta, directory)
  changes = tuple(dict.fromkeys(c for _, _, cs in plans.values() for c in cs))
  if not changes:
    return Migration(path=directory, out="", changes=())
  target, kept = _target(directory, out)
  if os.path.exists(target):  # an earlier migration that stopped part-way: ours to redo
    shutil.rmtree(target)
  try:
    for step, (meta, pmap, _) in plans.items():
      state = ckpt.read_saved(directory, step)
      if pmap:
        state = jax.tree.map(lambda x: np.asarray(x)[0], state)
      ckpt.save(target, step, state, meta, max_to_keep=None)
  except BaseException:
    shutil.rmtree(target, ignore_errors=True)
    raise
  if kept:
    _swap(directory, target, kept)
    target = directory
  return Migration(path=directory, out=target, changes=changes, kept=kept)
