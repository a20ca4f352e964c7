"""The one match loop: policies (`envs.Policy`) against each other, all
games on device in one jitted `while_loop`. In two-player zero-sum games the
agent takes each seat in half of the games; otherwise the agent plays every
seat.

The policies are called only where a move is made. A policy on G lanes (a
search above all) costs the same whether or not a lane's result is used, so
the loop never stops at a chance node: the games start with `Env.reset` and
each move is applied by `Env.step` with a key, both sampling the chance
nodes that follow until a decision or terminal node (each lane from its own
key). Each iteration is then one move in every unfinished game, not one
transition: on Nannon, whose every move is followed by a roll, half the
iterations (and policy calls) of a loop that stepped chance nodes one at a
time.
"""

from __future__ import annotations

from typing import Dict

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from anakin_mz.eval import stats


@chex.dataclass(frozen=True)
class MatchResult:
  """The games of one match, `[G]` each.

  Attributes:
    score: the agent's total reward.
    agent_seat: the seat the agent took (zero-sum games; else it played all).
    length: transitions, chance ones included.
    truncated: the game hit `max_game_length`.
  """

  score: chex.Array
  agent_seat: chex.Array
  length: chex.Array
  truncated: chex.Array


def play_match(
  env: envs.Env, agent: envs.Policy, opponent: envs.Policy, key: chex.PRNGKey, num_games: int
) -> MatchResult:
  """Plays `num_games` games of `agent` against `opponent` (jittable)."""
  zero_sum = env.payoff == "zero_sum"
  seats = jnp.arange(num_games) % env.num_players

  def mine(state):
    """The agent's rewards `[G]` of the transitions that made `state`."""
    return jnp.take_along_axis(state.rewards, seats[:, None], axis=1)[:, 0]

  def cond(carry):
    state, _, _ = carry
    return ~jnp.all(state.done)

  def body(carry):
    state, key, score = carry
    key, ka, ko, kc = jax.random.split(key, 4)
    a_agent = agent(state, ka)
    a_opp = opponent(state, ko)
    agent_moves = (state.current_player == seats) if zero_sum else jnp.bool_(True)
    action = jnp.where(agent_moves, a_agent, a_opp)
    # No unfinished game is at a chance node here: `reset` and the keyed
    # `step` sample chance until a decision or terminal node. Each game's
    # step key comes from the second half of `kc`, the stream the loop has
    # drawn since 3aeca37.
    step_keys = jax.random.split(jax.random.split(kc)[1], num_games)
    # `rewards` sums over the move and the chance nodes sampled after it.
    nxt = jax.vmap(env.step)(state, action.astype(jnp.int32), step_keys)
    return nxt, key, score + mine(nxt)

  k0, k1 = jax.random.split(key)
  state = jax.vmap(env.reset)(jax.random.split(k0, num_games))
  state, _, score = jax.lax.while_loop(cond, body, (state, k1, mine(state)))
  return MatchResult(
    score=score, agent_seat=seats, length=state.step_count, truncated=state.truncated
  )


def summarize(result: MatchResult) -> Dict[str, float]:
  """Mean/std score and win/draw/loss rates (TensorBoard scalars)."""
  score = result.score
  return {
    "score_mean": float(jnp.mean(score)),
    "score_std": float(jnp.std(score)),
    "win_rate": float(jnp.mean(score > 0)),
    "draw_rate": float(jnp.mean(score == 0)),
    "loss_rate": float(jnp.mean(score < 0)),
    "mean_length": float(jnp.mean(result.length)),
  }


def match_stats(result: MatchResult, env: envs.Env) -> Dict[str, object]:
  """The match with intervals (`stats`): the score's mean with a 95%
  interval, and in zero-sum games win/draw/loss rates with Wilson intervals,
  overall and by seat. JSON-ready."""
  result = jax.device_get(result)
  score = np.asarray(result.score, np.float64)
  seats = np.asarray(result.agent_seat)
  mean, std, lo, hi = stats.mean_interval(score)
  out: Dict[str, object] = {
    "score": {"mean": mean, "std": std, "low": lo, "high": hi},
    "mean_length": float(np.mean(result.length)),
    "truncated": int(np.sum(result.truncated)),
  }
  if env.payoff == "zero_sum":
    out["wdl"] = stats.win_draw_loss(score)
    out["by_seat"] = {
      str(p): stats.win_draw_loss(score[seats == p]) for p in range(env.num_players)
    }
  return out
