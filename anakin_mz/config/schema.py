"""The config's schema: the frozen dataclasses (`Config`, its `train`
section `TrainConfig`; `network`, `search` and `loss` are the core's
`NetworkConfig`, `SearchConfig` and `LossConfig`, and an agent's own section
comes from the agent registry) and `from_dict`, which builds and validates
one from a mapping (each section through dacite, `sections.build_section`).
`from_saved` reads a config saved with a run, in today's layout only (an
older one is `legacy.OlderLayout`). The package's docstring describes the
file format.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Dict, Mapping, Optional, Tuple

import envs
from anakin_mz.config import legacy
from anakin_mz.config.sections import build_section, top_level_number
from envs.core import ParamValue

if TYPE_CHECKING:  # the sections' modules pull in flax and mctx: imported lazily
  from anakin_mz.core.loss import LossConfig
  from anakin_mz.core.networks import NetworkConfig
  from anakin_mz.core.search import SearchConfig


LR_SCHEDULES = ("constant", "cosine")
# Who picks self-play's moves (`TrainConfig.selfplay_player`).
SELFPLAY_PLAYERS = ("search", "value")
# How a study's seeds lie on several devices (`runtime.seeds.choose_layout`).
SEED_LAYOUTS = ("auto", "seeds", "lanes")


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
  # < 1 (td_steps 0): each value target is the lambda-return over the decision
  # steps ahead, TD(lambda)'s target (`replay.prepare`); 1: as td_steps says.
  value_lambda: float = 1.0
  # What stands in for the rest of a game where a value target bootstraps:
  # "search", the root's search value; "siblings", the best sibling's real
  # one-ply value (the value head's greedy move, whatever self-play drew;
  # needs loss.sibling_value_weight > 0).
  value_bootstrap: str = "search"
  # Who picks self-play's moves: "search", the agent's search, sampled at the
  # temperature; "value", the best move by the sibling values (the value
  # head's expectimax of loss.sibling_depth moves on the real game, greedy, as
  # TD(lambda) plays). Either way the search runs and its visits train the policy.
  selfplay_player: str = "search"
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
  # A study on several devices: "seeds" splits the seed axis over them (each
  # device holds whole learners), "lanes" splits each seed's lanes as one run
  # does, "auto" picks (`runtime.seeds.choose_layout`). The numbers are the
  # same either way; a seed's own config (what its checkpoints keep) has "auto".
  seed_layout: str = "auto"

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
    if not 0.0 <= self.value_lambda <= 1.0:
      raise ValueError(
        f"train.value_lambda must be in [0, 1] (1: no lambda-return), got {self.value_lambda}"
      )
    if self.value_lambda < 1.0 and self.td_steps > 0:
      raise ValueError(
        f"train.value_lambda={self.value_lambda} with train.td_steps={self.td_steps}: the "
        "lambda-return already weighs every horizon; set td_steps to 0 (or value_lambda to 1)"
      )
    from anakin_mz.core.replay.targets import BOOTSTRAPS  # as the sections: lazily

    if self.value_bootstrap not in BOOTSTRAPS:
      raise ValueError(
        f"train.value_bootstrap must be one of {', '.join(BOOTSTRAPS)}, "
        f"got {self.value_bootstrap!r}"
      )
    if self.selfplay_player not in SELFPLAY_PLAYERS:
      raise ValueError(
        f"train.selfplay_player must be one of {', '.join(SELFPLAY_PLAYERS)}, "
        f"got {self.selfplay_player!r}"
      )
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
    if self.seed_layout not in SEED_LAYOUTS:
      raise ValueError(
        f"train.seed_layout must be one of {', '.join(SEED_LAYOUTS)}, got {self.seed_layout!r}"
      )

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
  # `play_search:` in the file: keys of `search` changed for the search that
  # plays (evaluate, play, export, tournaments, the periodic evaluation);
  # self-play keeps `search`. Sorted (key, value) pairs, values as built.
  play_search: Tuple[Tuple[str, object], ...] = ()

  @property
  def playing_search(self) -> SearchConfig:
    """The search that plays: `search` with `play_search`'s keys changed."""
    return dataclasses.replace(self.search, **dict(self.play_search))

  def __post_init__(self):
    spec = _registry().get(self.agent)  # raises for an unknown agent
    if spec.section is not None and self.agent_config is None:
      object.__setattr__(self, "agent_config", spec.section())
    if spec.check is not None:
      spec.check(self)
    if self.search.root == "expectimax" and spec.capabilities.tree:
      raise ValueError(
        "search.root 'expectimax' grows no tree, so self-play would have no visit "
        "distribution to train the policy on: set it under play_search (the search "
        "that plays), and a tree root (puct or gumbel) under search"
      )
    if self.train.seeds and not spec.capabilities.seed_axis:
      raise ValueError(
        f"agent {self.agent!r} cannot train several seeds as one program (its step does "
        "not vmap): train each seed on its own (seed=S, no train.seeds)"
      )
    if not 0 < self.discount <= 1:
      raise ValueError(f"discount must be in (0, 1], got {self.discount}")
    if self.loss.reconstruction_weight > 0 and not self.network.decoder:
      raise ValueError(
        f"loss.reconstruction_weight ({self.loss.reconstruction_weight}) needs a decoder to "
        "train: set network.decoder=true (or the weight to 0)"
      )
    if self.train.value_bootstrap == "siblings" and self.loss.sibling_value_weight == 0:
      raise ValueError(
        "train.value_bootstrap 'siblings' bootstraps from the sibling values self-play "
        "records for the sibling-value term, which loss.sibling_value_weight 0 turns off: "
        "set the weight > 0 (or value_bootstrap to 'search')"
      )
    if self.train.selfplay_player == "value" and (
      self.loss.sibling_value_weight == 0 or self.loss.sibling_lane_stride != 1
    ):
      raise ValueError(
        "train.selfplay_player 'value' plays the best of the sibling values self-play "
        "computes for the sibling-value term in every lane: set loss.sibling_value_weight "
        f"> 0 (now {self.loss.sibling_value_weight}) and loss.sibling_lane_stride to 1 "
        f"(now {self.loss.sibling_lane_stride}), or selfplay_player to 'search'"
      )
    if (
      self.train.value_bootstrap == "siblings"
      and self.train.td_steps > 0
      and self.train.reanalyse_fraction > 0
    ):
      raise ValueError(
        "train.reanalyse_fraction > 0 with td_steps > 0 refreshes the bootstrap with a "
        "fresh search value, which value_bootstrap 'siblings' replaces: use one of them"
      )
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
    if self.play_search:
      out["play_search"] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.play_search}
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
  agent_sections = {
    name: registry.get(name).section
    for name in registry.names()
    if registry.get(name).section is not None
  }
  valid = {"env", "seed", "discount", "agent", "play_search", *sections, *agent_sections}
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
  for (section, key), owner in legacy.MOVED.items():
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
  built["play_search"] = _play_search(raw, sections["search"], discount)
  return Config(
    env=name,
    env_params=tuple(sorted(params.items())),
    seed=seed,
    discount=discount,
    agent=agent,
    **built,
  )


def _play_search(raw: Mapping[str, object], search_cls, discount: float):
  """The `play_search` section as sorted (key, value) pairs, each value as
  the search section builds it; checked by building the whole playing
  search (errors name `play_search`)."""
  play = raw.get("play_search") or {}
  if not isinstance(play, Mapping):
    raise ValueError(f"config section 'play_search' must be a mapping, got {play!r}")
  if "discount" in play:
    raise ValueError(
      "play_search.discount is not a key: the discount is one top-level setting, "
      "the same for self-play and play"
    )
  search = raw.get("search") or {}
  built = build_section(search_cls, {**search, **play}, "play_search")
  try:
    dataclasses.replace(built, discount=discount)
  except ValueError as e:
    raise ValueError(f"invalid play_search: {e}") from None
  return tuple(sorted((k, getattr(built, k)) for k in play))


def from_saved(raw: Mapping[str, object]) -> Config:
  """`from_dict` of a config saved with a run (`to_dict`: a checkpoint's, a
  model file's).

  Raises:
    legacy.OlderLayout: a config saved in an older layout (`legacy`; `anakin-mz
      migrate` converts the checkpoint or model file once).
    ValueError: as `from_dict`.
  """
  legacy.check_saved(raw)
  return from_dict(raw)
