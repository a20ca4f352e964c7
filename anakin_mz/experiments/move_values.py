"""How well each player of a Nannon checkpoint ranks the moves, against the
solver's exact move values (the planning diagnosis, `planning.md`, E7).

The exact players (`exact.*_vs_optimal`) say how strong a player is; this
says where its move values are wrong. On a set of decisions with at least
two legal moves (the sources of `value_error`: a uniform sample of the
game's decisions, or fresh self-play of the checkpoint), each player's move
is compared with the exact best, and where the player values every move,
its values with the exact ones, split into the move the greedy head prefers
(`top`: the move self-play takes most, so the one the learned model is
trained on most) and the other legal moves (`other`):

* `greedy`, `search`: the network's greedy head and its own search (moves
  only, no values);
* `model_1ply`, `model_chance`: the learned model's one move, and one move
  with the chance that follows averaged on the model
  (`eval.planning.model_action_values`);
* `value`: the value head one move deep on the real game (the `value`
  player: `Agent.value_policy`).

A learned model whose `other` error is well above `value`'s, where `top`
is level, values the moves the policy rarely takes worse than the real
successors' values do: the search, which reads those values, cannot then
move far from the prior.

The exact value of a move is `2 q - 1`, `q` the mover's win probability
after it under optimal play (the solver's Bellman backup of its successor).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Sequence

import chex
import jax
import numpy as np

import envs
from envs import nannon_positions, nannon_solver
from anakin_mz.eval import planning
from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments import value_error
from anakin_mz.runtime import restore as restore_lib

PLAYERS = ("greedy", "search", "model_1ply", "model_chance", "value")
SOURCES = ("positions", "fresh")


@dataclasses.dataclass(frozen=True)
class MoveAccuracy:
  """One player's moves (and move values) against the exact ones.

  Attributes:
    decisions: decisions compared (each with >= 2 legal moves).
    agreement: share of them where its move is an exact best move.
    regret: mean exact win probability its move gives up against the best.
    top_share: share where its move is the greedy head's.
    mae_top: mean absolute error of its value of the greedy head's move,
      in value units (NaN for a player without values).
    mae_other: the same over the other legal moves.
    bias_top: mean (its value - exact) of the greedy head's move.
    bias_other: the same over the other legal moves (above 0: optimistic).
  """

  decisions: int
  agreement: float
  regret: float
  top_share: float
  mae_top: float
  mae_other: float
  bias_top: float
  bias_other: float


def exact_move_values(env: envs.Env, positions: np.ndarray, rolls: np.ndarray) -> np.ndarray:
  """float64 `[M, A]`: the mover's exact win probability after each legal
  action at decision (`positions` `[M]`, `rolls` `[M]` in 1..d); NaN where
  an action is illegal."""
  n, k, d = nannon_positions.config_of(env)
  tables = nannon_positions.build_tables(n, k, d)
  v = np.concatenate([np.asarray(nannon_solver.solve(env).values, np.float64), [np.nan]])
  succ = tables.succ[positions, rolls - 1]  # [M, k+1], N where the slot is illegal
  q = 1.0 - v[np.minimum(succ, len(v) - 1)]
  actions = tables.slot_action[positions]  # [M, k+1], -1 past the last slot
  out = np.full((len(positions), env.num_actions), np.nan)
  rows, slots = np.nonzero((succ < len(v) - 1) & (actions >= 0))
  out[rows, actions[rows, slots]] = q[rows, slots]
  return out


def _decisions(agent, source: str, samples: int, key: chex.PRNGKey):
  """(positions `[M]`, rolls `[M]`, `exact_move_values` `[M, A]`) of up to
  `samples` decisions of `source` with at least two legal moves."""
  if source == "positions":
    obs = value_error.uniform_observations(agent.env, 4 * samples, key)
  else:
    obs = value_error.fresh_observations(agent, 4 * samples, key)
  pos, roll = value_error.decisions_of(agent.env, obs)
  exact = exact_move_values(agent.env, pos, roll)
  choice = np.flatnonzero(np.sum(~np.isnan(exact), axis=1) >= 2)[:samples]
  return pos[choice], roll[choice], exact[choice]


def _player_moves(agent, states: envs.State, key: chex.PRNGKey, batch: int):
  """{player: (moves int `[M]`, values float `[M, A]` or None)} of `PLAYERS`."""
  lookahead = {
    name: jax.jit(
      lambda obs, chance=(name == "model_chance"): planning.model_action_values(
        agent.network,
        agent.params,
        obs,
        num_players=agent.env.num_players,
        discount=agent.config.discount,
        expect_chance=chance,
      )
    )
    for name in ("model_1ply", "model_chance")
  }
  value = agent.value_policy()
  programs = {
    "greedy": jax.jit(agent.greedy_policy()),
    "search": jax.jit(agent.search_policy()),
    "model_1ply": lambda s, k: lookahead["model_1ply"](s.observation),
    "model_chance": lambda s, k: lookahead["model_chance"](s.observation),
    "value": jax.jit(lambda s, k: value.action_values(s)),
  }
  total = states.current_player.shape[0]
  out = {}
  for name in PLAYERS:
    parts = []
    for i in range(0, total, batch):
      chunk = jax.tree.map(lambda x: x[i : i + batch], states)
      parts.append(np.asarray(programs[name](chunk, jax.random.fold_in(key, i))))
    result = np.concatenate(parts)
    if result.ndim == 1:
      out[name] = (result.astype(np.int64), None)
    else:
      legal = np.asarray(states.legal_action_mask)
      out[name] = (np.argmax(np.where(legal, result, -np.inf), axis=1), result)
  return out


def accuracy(moves: np.ndarray, values, top: np.ndarray, exact: np.ndarray) -> MoveAccuracy:
  """`MoveAccuracy` of `moves` `[M]` (and `values` `[M, A]` in value units,
  or None) against `exact` `[M, A]` win probabilities (NaN: illegal), `top`
  `[M]` the greedy head's moves."""
  m = len(moves)
  rows = np.arange(m)
  best = np.nanmax(exact, axis=1)
  got = exact[rows, moves]
  if np.any(np.isnan(got)):
    raise ValueError("a player chose an illegal move")
  stats = dict(
    decisions=m,
    agreement=float(np.mean(got >= best - 1e-9)),
    regret=float(np.mean(best - got)),
    top_share=float(np.mean(moves == top)),
  )
  if values is None:
    nan = math.nan
    return MoveAccuracy(**stats, mae_top=nan, mae_other=nan, bias_top=nan, bias_other=nan)
  legal = ~np.isnan(exact)
  diff = np.asarray(values, np.float64) - (2.0 * exact - 1.0)
  is_top = np.zeros_like(legal)
  is_top[rows, top] = True
  t, o = legal & is_top, legal & ~is_top
  return MoveAccuracy(
    **stats,
    mae_top=float(np.mean(np.abs(diff[t]))),
    mae_other=float(np.mean(np.abs(diff[o]))),
    bias_top=float(np.mean(diff[t])),
    bias_other=float(np.mean(diff[o])),
  )


def move_errors(
  directory: str,
  *,
  step=None,
  samples: int = 4096,
  seed: int = 0,
  sources: Sequence[str] = SOURCES,
  batch: int = 1024,
) -> Dict[str, object]:
  """Each of `PLAYERS`' `MoveAccuracy` (as dicts) on up to `samples`
  decisions of each of `sources` (`SOURCES`), for the Nannon checkpoint (or
  model file) `directory`.

  Raises:
    ValueError: not a Nannon NDMZ checkpoint, an unknown source.
    CheckpointError: an unreadable checkpoint.
  """
  bad = [s for s in sources if s not in SOURCES]
  if bad or not sources:
    raise ValueError(f"sources must be a non-empty subset of {SOURCES}, got {list(sources)}")
  agent = restore_lib.load_agent(directory, step, expect_env="nannon")
  caps = agent.spec.capabilities
  if not (caps.learned_model and caps.ndmz_network):
    raise ValueError(
      f"move values take apart a learned NDMZ model; agent {agent.config.agent!r} has none"
    )
  out: Dict[str, object] = {
    "checkpoint": directory,
    "step": agent.step,
    "env_params": dict(agent.env.params),
  }
  key = jax.random.PRNGKey(seed)
  for i, source in enumerate(sources):
    k_data, k_play = jax.random.split(jax.random.fold_in(key, i))
    pos, roll, exact = _decisions(agent, source, samples, k_data)
    states = nannon_solver.position_states(agent.env, pos, roll)
    played = _player_moves(agent, states, k_play, batch)
    top = played["greedy"][0]
    out[source] = {
      name: dataclasses.asdict(accuracy(moves, values, top, exact))
      for name, (moves, values) in played.items()
    }
  return out


def to_record(
  result: Dict[str, object], *, experiment: str, variant: str, command: str
) -> records_lib.RunRecord:
  """A run record of `move_errors`' result: figures `<source>.<player>.<stat>`
  (`fresh.model_chance.mae_other`, ...; NaN stats left out), the step as
  its updates."""
  figures = {}
  for source in SOURCES:
    for player, stats in result.get(source, {}).items():  # type: ignore[union-attr]
      for stat, value in stats.items():
        if not math.isnan(float(value)):
          figures[f"{source}.{player}.{stat}"] = float(value)
  return value_error.checkpoint_record(
    result, figures, experiment=experiment, variant=variant, command=command
  )
