"""Config files: where a config comes from and how a file reads.

* `read(path)`: a file's mapping, with the files it `extends` merged under
  it (mappings key by key at every depth; any other value replaces the
  parent's; a cycle is an error naming the files).
* `parse_overrides`: `section.key=value` overrides as a nested mapping.
* `load(config, overrides)`: a file (a path or a shipped name, `resolve`)
  and overrides -> a validated `Config` (`schema.from_dict`);
  `load_for_env(env)`: the config of a registered game (`default_source`:
  its shipped `NAME.yaml`, else the generic base of its kind, `env_kind`).
* the shipped configs (`shipped`, `shipped_path`): package data under
  `anakin_mz/configs/`, read through `importlib.resources`, never through
  the checkout's layout.
"""

from __future__ import annotations

import importlib.resources
import os
from typing import Dict, Mapping, Optional, Sequence, Tuple

import yaml

import envs
from anakin_mz.config.schema import Config, from_dict


def parse_overrides(overrides: Sequence[str]) -> Dict[str, object]:
  """`["train.batch_size=64", ...]` -> nested dict. Values are YAML scalars."""
  nested: Dict[str, object] = {}
  for item in overrides:
    if "=" not in item:
      raise ValueError(f"override {item!r} is not of the form section.key=value")
    key, text = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(parts):
      raise ValueError(f"override {item!r} has an empty key part")
    value = yaml.safe_load(text) if text.strip() else ""
    node = nested
    for p in parts[:-1]:
      node = node.setdefault(p, {})  # type: ignore[assignment]
      if not isinstance(node, dict):
        raise ValueError(f"override {item!r} conflicts with another override")
    node[parts[-1]] = value
  return nested


def _merge(base: Dict[str, object], over: Mapping[str, object]) -> Dict[str, object]:
  out = dict(base)
  for k, v in over.items():
    if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
      out[k] = _merge(dict(out[k]), v)  # type: ignore[arg-type]
    else:
      out[k] = v
  return out


# ------------------------------------------------------ where configs come from


def shipped_path(filename: str) -> str:
  """The path of `filename` in the package's `configs/` (package data; pip
  installs it as files, so the path can be opened)."""
  return str(importlib.resources.files("anakin_mz").joinpath("configs", *filename.split("/")))


# Folders of anakin_mz/configs/ whose files are training configs too, named
# `FOLDER/NAME` (the NDMZ paper's protocol: "paper/ndmz_636"; the PPO
# baseline's PureJaxRL settings: "ppo/minatar-breakout"). `kinds/` is not
# one: its bases are reached through `extends` and `default_source`.
SHIPPED_FOLDERS = ("paper", "ppo")


def shipped() -> Tuple[str, ...]:
  """The names of the shipped training configs, sorted (e.g. "nannon_12_5_6",
  "paper/ndmz_636")."""
  root = importlib.resources.files("anakin_mz").joinpath("configs")
  names = []
  for prefix, folder in [("", root)] + [(f + "/", root.joinpath(f)) for f in SHIPPED_FOLDERS]:
    names += [
      prefix + f.name[: -len(".yaml")]
      for f in folder.iterdir()
      if f.is_file() and f.name.endswith(".yaml")
    ]
  return tuple(sorted(names))


def resolve(config: str) -> str:
  """A `--config` value -> the YAML file it names: a path to a file, else
  the name of a shipped config, with or without `.yaml` ("nannon_12_5_6").

  Raises:
    ValueError: neither, listing the shipped configs.
  """
  if not isinstance(config, str) or not config:
    raise ValueError(f"a config is a YAML path or a shipped config's name, got {config!r}")
  if os.path.isfile(config):
    return config
  name = config[: -len(".yaml")] if config.endswith(".yaml") else config
  if name in shipped():
    return shipped_path(f"{name}.yaml")
  raise ValueError(
    f"config {config!r} does not exist: it is neither a YAML file nor the name of a "
    f"shipped config; shipped configs: {', '.join(shipped())}"
  )


# The generic bases of games without a config of their own, by
# (players, observation) of `env_kind`; chance changes no setting (NDMZ
# learns the chance it meets, explicit or hidden, and its agent `ndmz`
# plays every kind).
KIND_BASES = {
  ("one", "planes"): "kinds/one_player_planes.yaml",
  ("one", "flat"): "kinds/one_player_flat.yaml",
  ("two", "planes"): "kinds/two_player_planes.yaml",
  ("two", "flat"): "kinds/two_player_flat.yaml",
}


def env_kind(env: envs.Env) -> Tuple[str, str, str]:
  """(players, chance, observation) of `env`: players "one" (a single-player
  game), "two" (two-player zero-sum) or "other"; chance "none" (chance never
  acts), "explicit" (chance nodes with outcomes) or "hidden" (drawn inside
  the keyed step, `env.hidden_chance`); observation "planes" (`[H, W, C]`)
  or "flat" (any other shape: the mlp flattens it)."""
  if env.num_players == 1:
    players = "one"
  elif env.num_players == 2 and env.payoff == "zero_sum":
    players = "two"
  else:
    players = "other"
  if env.hidden_chance:
    chance = "hidden"
  elif env.num_chance_outcomes > 1:
    chance = "explicit"
  else:
    chance = "none"
  observation = "planes" if len(env.observation_shape) == 3 else "flat"
  return players, chance, observation


def default_source(env_name: str) -> Tuple[str, Tuple[str, ...]]:
  """Where the default config of registered env `env_name` comes from, as
  (YAML file, overrides) for `load`: its shipped `NAME.yaml`, else the
  generic base of its kind (`KIND_BASES`) with `env.name=NAME`.

  Raises:
    ValueError: an unknown env, or one of a kind without a base (naming
      `--config PATH`).
  """
  if env_name in shipped():
    return shipped_path(f"{env_name}.yaml"), ()
  env = envs.make(env_name)  # validates the name
  players, chance, observation = env_kind(env)
  base = KIND_BASES.get((players, observation))
  if base is None:
    raise ValueError(
      f"env {env_name!r} has no config of its own, and no generic one fits its kind "
      f"({env.num_players} players, payoff {env.payoff!r}; the generic configs are for "
      "one-player and two-player zero-sum games): write one (the shipped configs in "
      f"{shipped_path('')} show every key) and pass --config PATH"
    )
  return shipped_path(base), (f"env.name={env_name}",)


def load_for_env(
  env_name: str, config: Optional[str] = None, overrides: Sequence[str] = ()
) -> Tuple[Config, str, Tuple[str, ...]]:
  """The config of a run on registered env `env_name`: `config` (a path or
  a shipped name, `resolve`; default the env's own, `default_source`) with
  `overrides`. Returns (the config, its YAML file, all the overrides): the
  last two reload it with `load`.

  Raises:
    ValueError: an unknown env, config or key, a bad value, or a config
      for another env.
  """
  if config is None:
    path, own = default_source(env_name)
  else:
    path, own = resolve(config), ()
  everything = own + tuple(overrides)
  cfg = load(path, everything)
  if cfg.env != env_name:
    raise ValueError(f"--env={env_name} but config {config or path!r} is for env {cfg.env!r}")
  return cfg, path, everything


def read_yaml(path: str, what: str) -> object:
  """The YAML document of file `path`, a `what` ("config file", "spec", ...)
  in the error messages of an unreadable or invalid file."""
  try:
    with open(path, encoding="utf-8") as f:
      return yaml.safe_load(f)
  except OSError as e:
    raise ValueError(f"cannot read {what} {path!r}: {e.strerror}") from None
  except yaml.YAMLError as e:
    raise ValueError(f"{what} {path!r} is not valid YAML: {e}") from None


def _read_file(path: str) -> Dict[str, object]:
  """The mapping of YAML file `path`, as written (its `extends` unread)."""
  loaded = read_yaml(path, "config file")
  if not isinstance(loaded, Mapping):
    raise ValueError(f"config file {path!r} must hold a mapping")
  return dict(loaded)


def _parent(parent: object, path: str) -> str:
  """The file that `extends: PARENT` of config file `path` names: PARENT
  (or PARENT.yaml) beside `path`, else a file of the package's configs (a
  shipped config's name, or `kinds/NAME`), with or without `.yaml`."""
  if not isinstance(parent, str) or not parent.strip():
    raise ValueError(
      f"config file {path!r}: `extends` takes the name of a shipped config or a "
      f"YAML path relative to the file, got {parent!r}"
    )
  here = os.path.dirname(os.path.abspath(path))
  name = parent[: -len(".yaml")] if parent.endswith(".yaml") else parent
  for candidate in (os.path.join(here, parent), os.path.join(here, name + ".yaml")):
    if os.path.isfile(candidate):
      return candidate
  packaged = shipped_path(f"{name}.yaml")
  if os.path.isfile(packaged):
    return packaged
  kinds = ", ".join(k[: -len(".yaml")] for k in sorted(set(KIND_BASES.values())))
  raise ValueError(
    f"config file {path!r} extends {parent!r}, which is neither a YAML file beside it "
    f"nor a shipped config; shipped configs: {', '.join(shipped())} (and {kinds})"
  )


def read(path: str, _chain: Tuple[str, ...] = ()) -> Dict[str, object]:
  """The mapping that config file `path` stands for: the file itself or,
  where it has a top-level `extends: PARENT`, its parent's mapping (itself
  read so, a chain of any length) with the file's mapping merged over it:
  mappings merge key by key, at every depth; any other value (a number, a
  string, a list, null) replaces the parent's.

  Raises:
    ValueError: an unreadable file, one that is not a YAML mapping, an
      unknown parent (listing the shipped configs), or files that extend
      each other in a cycle (naming them).
  """
  real = os.path.realpath(path)
  if real in _chain:
    cycle = _chain[_chain.index(real) :] + (real,)
    raise ValueError(f"config files extend each other in a cycle: {' -> '.join(cycle)}")
  own = _read_file(path)
  if "extends" not in own:
    return own
  parent = _parent(own.pop("extends"), path)
  return _merge(read(parent, _chain + (real,)), own)


def load(
  config: Optional[str], overrides: Sequence[str] = (), base: Optional[Mapping[str, object]] = None
) -> Config:
  """Loads a YAML config (a path or a shipped config's name, `resolve`; or
  only `base`) with the files it extends (`read`), applies overrides,
  validates."""
  raw: Dict[str, object] = dict(base or {})
  if config is not None:
    raw = _merge(raw, read(resolve(config)))
  raw = _merge(raw, parse_overrides(overrides))
  return from_dict(raw)
