"""Params-only model files: a trained agent's network weights and the config
that builds its network, without the replay buffer, optimizer state or
anything else a checkpoint holds for resuming.

A model file is one msgpack document (`flax.serialization`), readable with no
training config at hand::

    {"format": "anakin-mz-model/1", "config": {...the run's config...},
     "env": "nannon", "env_version": 1, "step": 26208, "agent_kind": "search",
     "params": {...the network's parameter tree...}}

The file carries the play settings that were scored: the config's `search`
section (simulations, root, backup, expectimax depth, ...) is what every tool
searches with, and `agent_kind` is the player `evaluate` and `play` use
unless `--player` says otherwise (search, greedy or value). A file written
before the key existed, or with a config of an older layout, is refused
with one line naming `anakin-mz migrate`, which converts it once
(`runtime.migrate`).

`anakin-mz export --checkpoint DIR --out FILE` writes one from a checkpoint
(or from another model file, `--search KEY=VALUE` and `--player KIND`
changing those settings); every tool that takes `--checkpoint` (evaluate,
play, show-search, tournament) also takes a model file, or the name of a
model shipped in the package (`SHIPPED`):

    anakin-mz play --env nannon --checkpoint nannon
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import json
import os
from typing import Dict, Optional

import jax
import numpy as np
from flax import serialization, traverse_util

from anakin_mz import config as config_lib
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.core import players
from anakin_mz.core.types import Params

FORMAT = "anakin-mz-model/1"
SUFFIX = ".msgpack"

# Models that ship in the package (anakin_mz/models/<name>.msgpack), by name;
# docs/results/models.md says how each was trained and scores.
SHIPPED = ("nannon", "nannon_12_5_6", "einstein", "breakthrough", "carchess")


@dataclasses.dataclass(frozen=True)
class Model:
  """A model file's contents.

  Attributes:
    config: the run's config (its network, search and env build the agent).
    params: the network's parameter tree (numpy arrays).
    step: the update step the params were saved at.
    env_id, env_version: the game they were trained on.
    path: the file read.
    agent_kind: the player evaluate and play use by default (`core.players.PLAYERS`).
  """

  config: config_lib.Config
  params: Params
  step: int
  env_id: str
  env_version: int
  path: str
  agent_kind: str = players.DEFAULT_PLAYER


def shipped_path(name: str) -> str:
  """The packaged file of shipped model `name`."""
  return str(importlib.resources.files("anakin_mz") / "models" / f"{name}{SUFFIX}")


def resolve(spec: str) -> Optional[str]:
  """The model file `spec` names: an existing file, or a shipped model's
  name when no such path exists. None for a directory (a checkpoint) or a
  path that does not exist and names no shipped model."""
  if os.path.isfile(spec):
    return spec
  if not os.path.exists(spec) and spec in SHIPPED:
    return shipped_path(spec)
  return None


def write(
  path: str,
  config: config_lib.Config,
  params: Params,
  step: int,
  env_id: str,
  env_version: int,
  agent_kind: str = players.DEFAULT_PLAYER,
) -> int:
  """Writes a model file (parent directories made); returns its size in
  bytes. `agent_kind` is the player evaluate and play use by default.
  Raises ValueError for params with a non-finite entry or an unknown
  `agent_kind`."""
  if agent_kind not in players.PLAYERS:
    raise ValueError(f"agent kind must be one of {', '.join(players.PLAYERS)}, got {agent_kind!r}")
  host = jax.tree.map(np.asarray, jax.device_get(params))
  bad = ckpt.nonfinite_leaves(host)
  if bad:
    raise ValueError(f"refusing to export params with non-finite entries: {', '.join(bad)}")
  blob = serialization.msgpack_serialize(
    {
      "format": FORMAT,
      "config": json.dumps(config.to_dict(), sort_keys=True),
      "env": env_id,
      "env_version": int(env_version),
      "step": int(step),
      "agent_kind": agent_kind,
      "params": serialization.to_state_dict(host),
    }
  )
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(blob)
  os.replace(tmp, path)  # never a half-written model file
  return len(blob)


def read(path: str) -> Model:
  """Reads a model file.

  Raises:
    CheckpointError: a missing or unreadable file, another format, an
      older one (naming `anakin-mz migrate`), or a config this code rejects
      (each message names the path).
  """
  doc = read_document(path)
  if "agent_kind" not in doc:
    raise ckpt.older_format(path, "no agent_kind: written before model files named their player")
  config = ckpt.saved_config(json.loads(doc["config"]), "model file", path)
  agent_kind = doc["agent_kind"]
  if agent_kind not in players.PLAYERS:
    raise ckpt.CheckpointError(
      f"model file {path!r} names agent kind {agent_kind!r}, "
      f"not one of {', '.join(players.PLAYERS)}"
    )
  return Model(
    config=config,
    params=doc["params"],
    step=int(doc["step"]),
    env_id=str(doc["env"]),
    env_version=int(doc["env_version"]),
    path=path,
    agent_kind=str(agent_kind),
  )


def read_document(path: str) -> Dict[str, object]:
  """A model file's msgpack document as stored (its `config` a JSON
  string), checked for `FORMAT` and the keys every version held; `read`
  and `runtime.migrate` read through it. Raises CheckpointError as `read`."""
  try:
    with open(path, "rb") as f:
      raw = f.read()
  except OSError as e:
    raise ckpt.CheckpointError(f"cannot read model file {path!r}: {e.strerror}") from None
  try:
    doc = serialization.msgpack_restore(raw)
  except Exception as e:  # msgpack raises several unrelated types on bad bytes
    raise ckpt.CheckpointError(
      f"{path!r} is not an anakin-mz model file (not msgpack: {type(e).__name__}); "
      f"write one with `anakin-mz export`"
    ) from None
  if not isinstance(doc, dict) or doc.get("format") != FORMAT:
    found = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
    raise ckpt.CheckpointError(
      f"{path!r} is not an anakin-mz model file (format {found!r}, expected {FORMAT!r})"
    )
  missing = [k for k in ("config", "env", "env_version", "step", "params") if k not in doc]
  if missing:
    raise ckpt.CheckpointError(f"model file {path!r} lacks {', '.join(missing)}")
  return doc


def fit_params(model: Model, template: Params) -> Params:
  """`model.params` in the structure of `template` (the network's abstract
  params), checked leaf by leaf.

  Raises:
    CheckpointError: a missing, extra or differently shaped array, named.
  """
  expected: Dict[str, object] = serialization.to_state_dict(template)
  flat_expected = traverse_util.flatten_dict(expected, sep="/")
  flat_found = traverse_util.flatten_dict(model.params, sep="/")
  problems = []
  for name in sorted(set(flat_expected) | set(flat_found)):
    if name not in flat_found:
      problems.append(f"{name} missing")
    elif name not in flat_expected:
      problems.append(f"{name} not in the network")
    elif tuple(flat_found[name].shape) != tuple(flat_expected[name].shape):
      problems.append(
        f"{name} has shape {tuple(flat_found[name].shape)}, "
        f"the network {tuple(flat_expected[name].shape)}"
      )
  if problems:
    raise ckpt.CheckpointError(
      f"model file {model.path!r} does not fit its config's network: " + "; ".join(problems[:5])
    )
  params = serialization.from_state_dict(template, model.params)
  return jax.tree.map(lambda t, x: np.asarray(x, dtype=t.dtype), template, params)
