"""Experiment configuration: frozen dataclasses, loaded from YAML with
`key=value` overrides, validated up front and never mutated at run time.

A config file has five sections, each mapping onto one dataclass, and three
top-level settings:

    extends: nannon  # optional: the file this one changes (below)
    env:     {name: nannon, params: {...}}       # envs.make(name, **params)
    network: {...}                               # networks.NetworkConfig
    search:  {...}                               # search.SearchConfig
    loss:    {...}                               # loss.LossConfig
    train:   {...}                               # TrainConfig below
    seed: 0
    discount: 1.0    # the return's discount: the tree's edges and the value targets
    agent: ndmz      # a registered agent (`core.registry.names()`)
    <agent>: {...}   # the agent's own section, where it registers one
                     # (`ppo`, `tdlambda`): the keys no other agent reads

The discount is set once: `Config` hands it to the search (`search.discount`
is not a key of the file). Configs saved before it moved (with equal
`search.discount` and `train.discount`) still load. A key that moved into
an agent's own section (`MOVED`: `train.td_lambda` is `tdlambda.td_lambda`)
is refused under its old name, naming the new one; the configs saved with
runs before it moved still load (`from_saved`).

`extends: PARENT` makes a file a change of another (`read`): the parent's
mapping with the file's merged over it, mappings key by key at every depth,
any other value (a number, a string, a list, null) replacing the parent's.
PARENT is a YAML file beside the file (with or without `.yaml`), else a
shipped config's name (or `kinds/NAME`); the parent may extend another in
turn, and a cycle is an error that names the files. So a variant holds only
what differs: `nannon_12_5_6.yaml` is `extends: nannon` and a dozen keys.
The merged mapping is checked as a whole, after the overrides.

Overrides use dotted keys: `train.batch_size=64`, `search.num_simulations=25`,
`env.params.points=12`. Values are parsed as YAML scalars; numeric fields
also take the spellings YAML 1.1 leaves as strings (`3e-4`, `1e9`), and
`1_000` and `.5` (`parse_number`); booleans are `true`/`false`.

A section's mapping becomes its dataclass through dacite (`config.sections.build_section`),
which the dataclass's own checks then validate. Why dacite: it does this one
step, mapping -> typed frozen dataclass, and nothing else, so the
dataclasses stay what the code passes around (hashable: jit's static
arguments) with their `__post_init__` checks. It refuses unknown keys
(`strict`), checks each value against its field's annotation (a tuple's
items too: `network.hidden: [16.5]` is refused, not truncated to 16; and an
Optional int, `search.max_depth`, takes the spellings of the other ints),
and its type hooks read our numeric spellings; its exceptions carry the
field, so this
module words them as it always has (`unknown key(s) train.batchsize; valid
keys in 'train': ...`, `train.batch_size must be of type int (like its
default 256), got 'big'`). OmegaConf's structured configs type List and
Dict fields, not the Tuple fields that keep these dataclasses hashable, and
hand back its own mutable containers with its own messages to wrap;
ml_collections' ConfigDict is a mutable tree typed by its first values, in
place of the frozen dataclasses; tyro builds command lines from
dataclasses, not YAML files. None of them has a file-level `extends`, a few
lines here (`read`).

Where a config comes from (`resolve`, `default_source`, `load_for_env`): a
path to a YAML file, or the name of a config shipped in the package
(`anakin_mz/configs/NAME.yaml`, package data read through
`importlib.resources`, never through the checkout's layout). The default of
a registered env is its shipped `NAME.yaml`; a game without one (the adapted
`minatar-*` and `pgx-*` games) gets the generic base of its kind
(`env_kind`, `anakin_mz/configs/kinds/`).
"""

from __future__ import annotations

import dataclasses
import importlib.resources
import os
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Sequence, Tuple

import yaml

import envs
from anakin_mz.config.sections import build_section, top_level_number
from anakin_mz.config.sections import parse_number as parse_number  # public: `config.parse_number`
from envs.core import ParamValue

if TYPE_CHECKING:  # the sections' modules pull in flax and mctx: imported lazily
  from anakin_mz.core.loss import LossConfig
  from anakin_mz.core.networks import NetworkConfig
  from anakin_mz.core.search import SearchConfig


LR_SCHEDULES = ("constant", "cosine")


def _registry():
  # The agent registry (`core.registry`, a layer below: it imports JAX, so it
  # is read lazily). Whoever runs agents has imported them (`anakin_mz.agents`),
  # which registers them; an unregistered name is refused naming the valid ones.
  from anakin_mz.core import registry

  return registry


@dataclasses.dataclass(frozen=True)
class TrainConfig:
  """The Anakin loop: self-play, replay and optimisation settings."""

  num_envs: int = 64  # B: self-play games in parallel (global; split over devices)
  rollout_length: int = 16  # T: env transitions per lane per self-play chunk
  replay_capacity: int = 512  # L: time steps kept per lane in the ring buffer
  min_replay: int = 32  # time steps per lane before updates start
  batch_size: int = 256  # samples per gradient update (global; split over devices)
  replay_ratio: float = 1.0  # samples trained per transition generated
  unroll_steps: int = 6  # K
  td_steps: int = 0  # 0: game outcome; n > 0: n-step bootstrap
  learning_rate: float = 1e-3
  lr_schedule: str = "constant"  # "constant", or "cosine" decay over total_updates
  learning_rate_end: float = 1e-4  # the cosine schedule's final learning rate
  max_grad_norm: float = 5.0  # Adam with global-norm clipping
  temperature_start: float = 1.0  # self-play action temperature, decayed
  temperature_end: float = 0.25  # linearly to this over the decay
  temperature_decay_updates: int = 0  # updates the decay takes (0: total_updates)
  total_updates: int = 10_000  # budget in gradient updates
  eval_every: int = 500  # updates between evaluations (0: never)
  eval_games: int = 256  # games per evaluation
  checkpoint_every: int = 1_000  # updates between checkpoints (0: end only)
  log_every: int = 50  # updates between TensorBoard scalars
  search_at_chance: bool = False  # old self-play path: search at chance nodes too
  reanalyse_fraction: float = 0.0  # share of each batch given fresh targets (0: off)
  # A study: these seeds train as one program, each under <logdir>/seed<S>
  # (`runtime.seeds`); empty: one run of the config's `seed`.
  seeds: Tuple[int, ...] = ()

  def __post_init__(self):
    positive = (
      "num_envs",
      "rollout_length",
      "replay_capacity",
      "batch_size",
      "unroll_steps",
      "total_updates",
      "eval_games",
      "log_every",
    )
    for name in positive:
      if getattr(self, name) < 1:
        raise ValueError(f"train.{name} must be >= 1, got {getattr(self, name)}")
    if self.replay_ratio <= 0:
      raise ValueError(f"train.replay_ratio must be > 0, got {self.replay_ratio}")
    if self.lr_schedule not in LR_SCHEDULES:
      raise ValueError(f"train.lr_schedule must be one of {LR_SCHEDULES}, got {self.lr_schedule!r}")
    if not (self.learning_rate > 0 and self.learning_rate_end >= 0):
      raise ValueError(
        "train.learning_rate must be > 0 and train.learning_rate_end "
        f">= 0, got {self.learning_rate} and {self.learning_rate_end}"
      )
    if self.td_steps < 0:
      raise ValueError(f"train.td_steps must be >= 0, got {self.td_steps}")
    if self.replay_capacity < self.unroll_steps + self.rollout_length + 1:
      raise ValueError(
        "train.replay_capacity must exceed rollout_length + "
        f"unroll_steps; got {self.replay_capacity}"
      )
    if not 0 <= self.min_replay <= self.replay_capacity:
      raise ValueError(f"train.min_replay must be in [0, replay_capacity], got {self.min_replay}")
    for name in ("eval_every", "checkpoint_every", "temperature_decay_updates"):
      if getattr(self, name) < 0:
        raise ValueError(f"train.{name} must be >= 0")
    if not 0.0 <= self.reanalyse_fraction <= 1.0:
      raise ValueError(
        f"train.reanalyse_fraction must be in [0, 1] (0: off), got {self.reanalyse_fraction}"
      )
    if self.reanalyse_fraction > 0 and self.reanalyse_rows == 0:
      raise ValueError(
        f"train.reanalyse_fraction={self.reanalyse_fraction} of batch_size="
        f"{self.batch_size} rounds to 0 reanalysed samples: use 0 (off) or at "
        f"least {0.5 / self.batch_size:.3g}"
      )
    if any(s < 0 for s in self.seeds) or len(set(self.seeds)) != len(self.seeds):
      raise ValueError(f"train.seeds must be distinct integers >= 0, got {list(self.seeds)}")

  @property
  def reanalyse_rows(self) -> int:
    """Samples of each batch that get fresh targets: the first
    `reanalyse_fraction * batch_size`, rounded half up (the starts are
    i.i.d., so the first rows are a uniform sample)."""
    return int(self.reanalyse_fraction * self.batch_size + 0.5)

  def learning_rate_schedule(self):
    """The optax learning rate: a float, or a schedule of the update count."""
    if self.lr_schedule == "constant":
      return self.learning_rate
    import optax

    return optax.cosine_decay_schedule(
      self.learning_rate, self.total_updates, alpha=self.learning_rate_end / self.learning_rate
    )

  def updates_per_chunk(self, transitions_per_chunk: int) -> int:
    """Gradient updates after each self-play chunk, from `replay_ratio`."""
    return max(1, round(self.replay_ratio * transitions_per_chunk / self.batch_size))


def _section_classes():
  # Imported lazily: these modules pull in flax and mctx.
  from anakin_mz.core.loss import LossConfig
  from anakin_mz.core.networks import NetworkConfig
  from anakin_mz.core.search import SearchConfig

  return {
    "network": NetworkConfig,
    "search": SearchConfig,
    "loss": LossConfig,
    "train": TrainConfig,
  }


@dataclasses.dataclass(frozen=True)
class Config:
  """A whole experiment. Build with `load` or `from_dict`."""

  env: str
  env_params: Tuple[Tuple[str, ParamValue], ...]
  network: NetworkConfig
  search: SearchConfig
  loss: LossConfig
  train: TrainConfig
  seed: int = 0
  discount: float = 1.0  # the return's discount: search edges and value targets
  agent: str = "ndmz"  # a registered agent (`core.registry`)
  # The agent's own section (`<agent>:` in the file), where it registers one.
  agent_config: Optional[object] = None

  def __post_init__(self):
    spec = _registry().get(self.agent)  # raises for an unknown agent
    if spec.section is not None and self.agent_config is None:
      object.__setattr__(self, "agent_config", spec.section())
    if spec.check is not None:
      spec.check(self)
    if self.train.seeds and not spec.capabilities.seed_axis:
      raise ValueError(
        f"agent {self.agent!r} cannot train several seeds as one program (its step does "
        "not vmap): train each seed on its own (seed=S, no train.seeds)"
      )
    if not 0 < self.discount <= 1:
      raise ValueError(f"discount must be in (0, 1], got {self.discount}")
    if self.search.discount != self.discount:
      raise ValueError(
        f"search.discount ({self.search.discount}) differs from discount "
        f"({self.discount}): build the search section with the config's discount"
      )

  def make_env(self) -> envs.Env:
    """The configured game."""
    return envs.make(self.env, **dict(self.env_params))

  def to_dict(self) -> Dict[str, object]:
    """A plain, YAML/JSON-serialisable dict that `from_dict` reads back."""
    out = {
      "env": {"name": self.env, "params": dict(self.env_params)},
      "seed": self.seed,
      "discount": self.discount,
      "agent": self.agent,
    }
    sections = {name: getattr(self, name) for name in ("network", "search", "loss", "train")}
    if self.agent_config is not None:
      sections[self.agent] = self.agent_config
    for name, value in sections.items():
      section = dataclasses.asdict(value)
      section.pop("discount", None)  # a top-level setting
      out[name] = {k: list(v) if isinstance(v, tuple) else v for k, v in section.items()}
    return out


def from_dict(raw: Mapping[str, object]) -> Config:
  """Builds and validates a Config from a parsed YAML mapping.

  Raises:
    ValueError: a missing or unknown section or key, a value of the wrong
      type or out of range, or an unknown env / env parameter.
  """
  if not isinstance(raw, Mapping):
    raise ValueError(f"a config must be a mapping, got {type(raw).__name__}")
  sections = _section_classes()
  registry = _registry()
  raw = _legacy_discount(raw)
  agent_sections = {
    name: registry.get(name).section
    for name in registry.names()
    if registry.get(name).section is not None
  }
  valid = {"env", "seed", "discount", "agent", *sections, *agent_sections}
  unknown = sorted(set(raw) - valid)
  if unknown:
    raise ValueError(f"unknown config section(s) {unknown}; valid: {sorted(valid)}")
  env_section = raw.get("env")
  if not isinstance(env_section, Mapping) or "name" not in env_section:
    raise ValueError(
      "config needs `env: {name: ..., params: {...}}`; "
      f"registered envs: {', '.join(envs.registered())}"
    )
  extra = sorted(set(env_section) - {"name", "params"})
  if extra:
    raise ValueError(f"unknown key(s) in env section: {extra}; valid: name, params")
  name = env_section["name"]
  params = dict(env_section.get("params") or {})
  env = envs.make(name, **params)  # validates name and params with a clear message
  agent = raw.get("agent", "ndmz")
  spec = registry.get(agent)  # raises for an unknown agent
  if not spec.capabilities.supports(env):
    raise ValueError(
      f"agent {agent!r} does not support env {name!r} ({registry.unsupported_reason(env)}); "
      f"valid agents for it: {', '.join(registry.supported(env))}"
    )
  other = sorted(set(raw) & set(agent_sections) - {agent})
  if other:
    raise ValueError(
      f"config section(s) {other} belong to other agents than {agent!r}; remove them"
    )
  for (section, key), owner in MOVED.items():
    if isinstance(raw.get(section), Mapping) and key in raw[section]:
      value = raw[section][key]
      raise ValueError(
        f"{section}.{key} is not a key: it is agent {owner}'s own setting, in its "
        f"section (`{owner}: {{{key}: {value}}}`; as an override, {owner}.{key}={value})"
      )
  seed = raw.get("seed", 0)
  if not isinstance(seed, int) or isinstance(seed, bool):
    raise ValueError(f"seed must be an integer, got {seed!r}")
  discount = top_level_number(raw.get("discount", 1.0), "discount")
  for k in ("search", "train"):
    if isinstance(raw.get(k), Mapping) and "discount" in raw[k]:
      raise ValueError(
        f"{k}.discount is not a key: the discount is one top-level "
        f"setting (`discount: {raw[k]['discount']}`), used by the "
        "search and the value targets alike"
      )
  built = {k: build_section(cls, raw.get(k) or {}, k) for k, cls in sections.items()}
  try:
    built["search"] = dataclasses.replace(built["search"], discount=discount)
  except ValueError as e:
    raise ValueError(f"invalid discount: {e}") from None
  if agent in agent_sections:
    built["agent_config"] = build_section(agent_sections[agent], raw.get(agent) or {}, agent)
  return Config(
    env=name,
    env_params=tuple(sorted(params.items())),
    seed=seed,
    discount=discount,
    agent=agent,
    **built,
  )


# The keys that moved from a shared section into an agent's own, (section,
# key) -> the agent: `from_dict` refuses the old spelling, naming the new;
# `from_saved` moves it in the configs saved before.
MOVED = {("train", "td_lambda"): "tdlambda"}


def from_saved(raw: Mapping[str, object]) -> Config:
  """`from_dict` of a config saved with a run (`to_dict`: a checkpoint's, a
  model file's), of today's layout or an older one. A key that has since
  moved into an agent's own section (`MOVED`) moves there where the config
  is that agent's, and is dropped where it is another's, which never read
  it (every saved config carried `train.td_lambda`)."""
  if not isinstance(raw, Mapping):
    return from_dict(raw)
  out = dict(raw)
  agent = raw.get("agent", "ndmz")
  for (section, key), owner in MOVED.items():
    values = out.get(section)
    if isinstance(values, Mapping) and key in values:
      out[section] = {k: v for k, v in values.items() if k != key}
      if agent == owner:
        own = out.get(owner)
        own = dict(own) if isinstance(own, Mapping) else {}
        own.setdefault(key, values[key])
        out[owner] = own
  return from_dict(out)


def _legacy_discount(raw: Mapping[str, object]) -> Mapping[str, object]:
  """Configs saved before the discount became one top-level setting hold it
  twice, `search.discount` and `train.discount`, which had to be equal:
  moves that value to the top level."""
  search, train = raw.get("search"), raw.get("train")
  if not (
    isinstance(search, Mapping)
    and isinstance(train, Mapping)
    and "discount" in search
    and "discount" in train
    and "discount" not in raw
  ):
    return raw
  if search["discount"] != train["discount"]:
    raise ValueError(
      f"search.discount ({search['discount']}) differs from "
      f"train.discount ({train['discount']}); the discount is one setting"
    )
  out = dict(raw, discount=search["discount"])
  out["search"] = {k: v for k, v in search.items() if k != "discount"}
  out["train"] = {k: v for k, v in train.items() if k != "discount"}
  return out


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


# A file of anakin_mz/configs/ that is not a training config.
_NOT_CONFIGS = ("strength.yaml",)  # the bars of `anakin_mz.experiments.strength`
_NOT_CONFIGS_NAMES = tuple(name[: -len(".yaml")] for name in _NOT_CONFIGS)


def shipped_path(filename: str) -> str:
  """The path of `filename` in the package's `configs/` (package data; pip
  installs it as files, so the path can be opened)."""
  return str(importlib.resources.files("anakin_mz").joinpath("configs", *filename.split("/")))


# Folders of anakin_mz/configs/ whose files are training configs too, named
# `FOLDER/NAME` (the NDMZ paper's protocol: "paper/ndmz_636"). `kinds/` is
# not one: its bases are reached through `extends` and `default_source`.
SHIPPED_FOLDERS = ("paper",)


def shipped() -> Tuple[str, ...]:
  """The names of the shipped training configs, sorted (e.g. "nannon_12_5_6",
  "paper/ndmz_636")."""
  root = importlib.resources.files("anakin_mz").joinpath("configs")
  names = []
  for prefix, folder in [("", root)] + [(f + "/", root.joinpath(f)) for f in SHIPPED_FOLDERS]:
    names += [
      prefix + f.name[: -len(".yaml")]
      for f in folder.iterdir()
      if f.is_file() and f.name.endswith(".yaml") and f.name not in _NOT_CONFIGS
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
  if name not in _NOT_CONFIGS_NAMES:
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
