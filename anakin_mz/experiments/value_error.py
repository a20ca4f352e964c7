"""How close a Nannon checkpoint's value head is to the solver's exact values,
on three sets of decision positions (the planning diagnosis, `planning.md`):

* `positions`: a uniform sample of every decision (position, roll) of the
  game, whether play reaches it or not;
* `replay`: the decision steps in the checkpoint's own replay buffer, what
  the value head was trained on;
* `fresh`: the decision steps of new self-play games from the checkpoint
  (its search, its end temperature, root noise on): the replay's
  distribution, on games the network never saw.

A gap between `replay` and `fresh` is overfitting to the replay; between
`fresh` and `positions`, positions self-play does not visit. The exact value
of a decision is `2 w - 1`, `w` the mover's win probability under optimal
play from it (`nannon_solver.decision_values`); the network's is its value
head on the observation (the mover's view).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import nannon_solver
from anakin_mz.core import act, selfplay
from anakin_mz.experiments import records as records_lib
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export
from anakin_mz.core import registry
from anakin_mz.runtime import restore as restore_lib

SOURCES = ("positions", "replay", "fresh")


@dataclasses.dataclass(frozen=True)
class ValueAccuracy:
  """The value head against the exact values on one set of decisions.

  Attributes:
    count: decisions compared.
    pearson: correlation of the two.
    mae: mean absolute error, in value units ([-1, 1]; half of it in win
      probability).
    rmse: root mean squared error.
    bias: mean of (network - exact): above 0, the head is optimistic.
  """

  count: int
  pearson: float
  mae: float
  rmse: float
  bias: float


def compare(network_values: np.ndarray, exact_values: np.ndarray) -> ValueAccuracy:
  """`ValueAccuracy` of `network_values` `[M]` against `exact_values` `[M]`."""
  a = np.asarray(network_values, np.float64)
  b = np.asarray(exact_values, np.float64)
  if a.shape != b.shape or a.ndim != 1 or a.size < 2:
    raise ValueError(f"need two [M] arrays with M >= 2, got {a.shape} and {b.shape}")
  d = a - b
  return ValueAccuracy(
    count=int(a.size),
    pearson=float(np.corrcoef(a, b)[0, 1]),
    mae=float(np.mean(np.abs(d))),
    rmse=float(np.sqrt(np.mean(d * d))),
    bias=float(np.mean(d)),
  )


def decisions_of(env: envs.Env, observations: np.ndarray):
  """(position int `[M]`, roll int `[M]`, 0 where no die is shown) of
  Nannon observations `[M, *obs]` (`nannon_solver.observation_decision`)."""
  p = env.params
  decode = jax.jit(
    jax.vmap(
      lambda o: nannon_solver.observation_decision(o, p["points"], p["checkers"], p["die_sides"])
    )
  )
  pos, roll = decode(jnp.asarray(observations))
  return np.asarray(pos), np.asarray(roll)


def _exact(env: envs.Env, observations: np.ndarray, win: np.ndarray) -> np.ndarray:
  """`[M]` exact values `2 w - 1` of decision observations `[M, *obs]`,
  `win` the game's `nannon_solver.decision_values`."""
  pos, roll = decisions_of(env, observations)
  if np.any(roll < 1):
    raise ValueError("an observation shows no die: not a decision node")
  return 2.0 * win[pos, roll - 1] - 1.0


def _values(agent, observations: np.ndarray, batch: int = 8192) -> np.ndarray:
  value = jax.jit(act.root_value(agent.network, agent.params))
  starts = range(0, len(observations), batch)
  out = [np.asarray(value(jnp.asarray(observations[i : i + batch]))) for i in starts]
  return np.concatenate(out)


def uniform_observations(env: envs.Env, count: int, key: chex.PRNGKey) -> np.ndarray:
  """`[min(count, all), *obs]`: decision observations drawn uniformly
  without replacement from all of the game's decisions."""
  pos, roll = nannon_solver.decision_index(env)
  pick = np.sort(np.asarray(jax.random.permutation(key, len(pos)))[:count])
  obs = []
  for i in range(0, len(pick), 65536):
    chunk = pick[i : i + 65536]
    obs.append(np.asarray(nannon_solver.position_states(env, pos[chunk], roll[chunk]).observation))
  return np.concatenate(obs)


def replay_observations(agent, directory: str, step: Optional[int] = None) -> np.ndarray:
  """`[M, *obs]`: the decision steps of the replay saved with the
  checkpoint (`directory`, `step`) of `agent`, its learner's layout."""
  if export.resolve(directory) is not None:
    raise ValueError(
      f"{directory!r} is a model file (parameters only): it holds no replay; "
      "use the sources positions and fresh, or a training checkpoint"
    )
  learner = registry.make_learner(agent.config)
  template = learner.abstract_state().buffer
  buffer, _ = ckpt.restore_field(directory, "buffer", template, step)
  data = jax.device_get(buffer.data)
  capacity = data.player.shape[0]
  slots = np.arange(capacity)[:, None]
  written = slots < np.asarray(jax.device_get(buffer.count))[None, :]
  keep = written & np.asarray(data.valid) & (np.asarray(data.player) >= 0)
  if keep.sum() < 2:
    raise ValueError(
      f"the replay saved in {directory!r} holds {int(keep.sum())} decision step(s): "
      "a checkpoint saved before self-play filled it; use the other sources"
    )
  return np.asarray(data.observation)[keep]


def fresh_observations(agent, count: int, key: chex.PRNGKey) -> np.ndarray:
  """`[>= count, *obs]`: decision observations of new self-play games of
  `agent` (its search settings with root noise, its end temperature), the
  lanes of its config; the first `env.max_game_length // 4` steps of each
  lane are skipped so that the games are at every stage, as in a replay."""
  config = agent.config
  lanes = config.train.num_envs
  warm = agent.env.max_game_length // 4
  steps = warm + max(count // lanes + 1, 1) * 2  # about half the steps are decisions
  k_init, k_play = jax.random.split(key)
  actor = selfplay.init_actors(agent.env, k_init, lanes)
  search = agent.spec.search
  if search is None:
    raise ValueError(f"agent {config.agent!r} does not search: no self-play to sample")
  play = jax.jit(
    lambda actor, key: selfplay.rollout(
      agent.params,
      actor,
      key,
      env=agent.env,
      network=agent.network,
      config=config.search,
      num_steps=steps,
      temperature=config.train.temperature_end,
      search=search,
    )[1]
  )
  rec = jax.device_get(play(actor, k_play))
  valid = np.asarray(rec.valid)
  # Slots `[I * (R + 1), B]` hold each lane's steps in order, with invalid
  # padding: skip each lane's first `warm` steps.
  keep = valid & (np.cumsum(valid, axis=0) > warm) & (np.asarray(rec.player) >= 0)
  return np.asarray(rec.observation)[keep][:count]


def value_errors(
  directory: str,
  *,
  step: Optional[int] = None,
  samples: int = 100_000,
  seed: int = 0,
  sources=SOURCES,
) -> Dict[str, object]:
  """The checkpoint's value head against the exact values on each of
  `sources` (`SOURCES`, the module doc), up to `samples` decisions each.

  Raises:
    ValueError: not a Nannon checkpoint, an unknown source.
    CheckpointError: an unreadable checkpoint (`replay` also needs its
      learner state).
  """
  bad = [s for s in sources if s not in SOURCES]
  if bad or not sources:
    raise ValueError(f"sources must be a non-empty subset of {SOURCES}, got {list(sources)}")
  agent = restore_lib.load_agent(directory, step, expect_env="nannon")
  key = jax.random.PRNGKey(seed)
  k_pos, k_fresh = jax.random.split(key)
  win = nannon_solver.decision_values(agent.env)  # once: 12-5-6's takes its move tables
  out: Dict[str, object] = {
    "checkpoint": directory,
    "step": agent.step,
    "env_params": dict(agent.env.params),
  }
  for source in sources:
    if source == "positions":
      obs = uniform_observations(agent.env, samples, k_pos)
    elif source == "replay":
      obs = replay_observations(agent, directory, step)
      if len(obs) > samples:
        obs = obs[np.asarray(jax.random.permutation(k_pos, len(obs)))[:samples]]
    else:
      obs = fresh_observations(agent, samples, k_fresh)
    out[source] = dataclasses.asdict(compare(_values(agent, obs), _exact(agent.env, obs, win)))
  return out


def to_record(
  result: Dict[str, object], *, experiment: str, variant: str, command: str
) -> records_lib.RunRecord:
  """A run record of `value_errors`' result: figures `<source>.<stat>`
  (`positions.pearson`, `fresh.mae`, ...), the step as its updates."""
  figures = {}
  for source in SOURCES:
    if source in result:
      for stat, value in result[source].items():  # type: ignore[union-attr]
        figures[f"{source}.{stat}"] = float(value)
  return checkpoint_record(result, figures, experiment=experiment, variant=variant, command=command)


def checkpoint_record(
  result: Dict[str, object],
  figures: Dict[str, float],
  *,
  experiment: str,
  variant: str,
  command: str,
) -> records_lib.RunRecord:
  """A run record of a measurement of one Nannon checkpoint (`result` holds
  its `step` and `env_params`): `figures` by name, the step as its updates."""
  return records_lib.new(
    experiment,
    variant,
    None,
    command=command,
    budget=records_lib.Budget(updates=int(result["step"])),  # type: ignore[arg-type]
    evaluation={"env_params": result["env_params"]},
    figures={name: records_lib.Figure(value) for name, value in figures.items()},
  )
