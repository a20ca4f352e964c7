"""The one match loop: policies (`envs.Policy`) against each other, all
games on device in one jitted `while_loop`: `play_match(env, policy,
opponent, key, num_games)` scores `policy`, the policy under test. In
zero-sum games it takes each seat in turn (game g: seat g % num_players),
the opponent every other seat; otherwise it plays every seat.

The policies are called only where a move is made. A policy on G lanes (a
search above all) costs the same whether or not a lane's result is used, so
the loop never stops at a chance node: the games start with `Env.reset` and
each move is applied by `Env.step` with a key, both sampling the chance
nodes that follow until a decision or terminal node (each lane from its own
key). Each iteration is then one move in every unfinished game (but those
waiting, below), not one transition: on Nannon, whose every move is
followed by a roll, half the iterations (and policy calls) of a loop that
stepped chance nodes one at a time.

In zero-sum games the policy is called on `ceil(G / num_players)` lanes
and the opponent (every other seat) on the rest, not each on all G: the
games where it is to move, the lowest-numbered first (`take_lanes`), so a
search costs half as much in a two-player match. Players alternate, so
after the first move about half the unfinished games wait on each player; a
game that finds its player's lanes full (only where more than half the
games start with one player) waits one iteration, and in a two-player game
no game waits twice (see `take_lanes`). Waiting changes no game's
distribution: a policy sees only the state and a fresh key. Where the policy
plays every seat (one player, or a collaborative game) it gets all G lanes
and the opponent is not called.
"""

from __future__ import annotations

from typing import Dict, Tuple

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from anakin_mz.eval import stats
from anakin_mz.core.types import where_lanes


@chex.dataclass(frozen=True)
class MatchResult:
  """The games of one match, `[G]` each.

  Attributes:
    score: the policy's total reward (the policy under test, `play_match`'s
      `policy`).
    policy_seat: the seat the policy took (zero-sum games; else it played all).
    length: transitions, chance ones included.
    truncated: the game hit `max_game_length`.
  """

  score: chex.Array
  policy_seat: chex.Array
  length: chex.Array
  truncated: chex.Array


def take_lanes(want: chex.Array, size: int) -> Tuple[chex.Array, chex.Array]:
  """The `size` lanes a policy is called on: the lanes that `want` it (`[G]`
  bool), the lowest-numbered first, then others to fill. Returns `(lanes
  [size] int32, served [G] bool)`: `served` marks the wanting lanes that got
  a place (the others wait an iteration).

  Why no game of an alternating two-player game waits twice (`size = G/2`):
  if more than `size` games want one player at an iteration, the other
  player's lanes are not full, so at the next iteration the games wanting
  the first are the other's served games plus the waiting ones, at most
  `G - size = size`; and once neither is full, the games that want a player
  are among those the other just served, at most `size`."""
  lanes = jnp.argsort(~want, stable=True)[:size].astype(jnp.int32)
  served = jnp.zeros_like(want).at[lanes].set(want[lanes])
  return lanes, served


def play_match(
  env: envs.Env,
  policy: envs.Policy,
  opponent: envs.Policy,
  key: chex.PRNGKey,
  num_games: int,
) -> MatchResult:
  """Plays `num_games` games of `policy`, the policy under test, against
  `opponent` (jittable); the result scores `policy`.

  Args:
    env: the game.
    policy: an `envs.Policy`, `(state [G'], key) -> actions [G']`: in a
      zero-sum game it takes seat g % num_players of game g; otherwise every
      seat, and `opponent` is not called.
    opponent: an `envs.Policy` for the other seats of a zero-sum game.
    key: the match's key (either flavour).
    num_games: G, the games played at once.
  """
  zero_sum = env.payoff == "zero_sum"
  seats = jnp.arange(num_games) % env.num_players
  # The lanes of each policy (zero-sum games): the policy moves in about one
  # game in `num_players` at a time, the opponent (every other seat) in the
  # rest; with odd G, a two-player game's two policies get G // 2 + 1 each.
  policy_size = -(-num_games // env.num_players)
  opponent_size = num_games - num_games // env.num_players

  def mine(state):
    """The policy's rewards `[G]` of the transitions that made `state`."""
    return jnp.take_along_axis(state.rewards, seats[:, None], axis=1)[:, 0]

  def call(player, state, want, size, key):
    """`player` (a policy) on `size` lanes (`take_lanes`): `[G]` actions (0
    where not served) and the lanes served."""
    lanes, served = take_lanes(want, size)
    taken = player(jax.tree.map(lambda x: x[lanes], state), key).astype(jnp.int32)
    return jnp.zeros(num_games, jnp.int32).at[lanes].set(taken), served

  def cond(carry):
    state, _, _ = carry
    return ~jnp.all(state.done)

  def body(carry):
    state, key, score = carry
    key, kp, ko, kc = jax.random.split(key, 4)
    live = ~state.done
    if zero_sum:
      policy_moves = state.current_player == seats
      a_policy, policy_served = call(policy, state, live & policy_moves, policy_size, kp)
      a_opp, opp_served = call(opponent, state, live & ~policy_moves, opponent_size, ko)
      action = jnp.where(policy_moves, a_policy, a_opp)
      moved = policy_served | opp_served
    else:
      action, moved = policy(state, kp).astype(jnp.int32), live
    # No unfinished game is at a chance node here: `reset` and the keyed
    # `step` sample chance until a decision or terminal node. Each game's
    # step key comes from the second half of `kc`, the stream the loop has
    # drawn since 3aeca37.
    step_keys = jax.random.split(jax.random.split(kc)[1], num_games)
    # `rewards` sums over the move and the chance nodes sampled after it.
    nxt = jax.vmap(env.step)(state, action, step_keys)
    # A waiting game keeps its state and scores nothing (as a finished one).
    nxt = where_lanes(moved, nxt, state)
    return nxt, key, score + jnp.where(moved, mine(nxt), 0.0)

  k0, k1 = jax.random.split(key)
  state = jax.vmap(env.reset)(jax.random.split(k0, num_games))
  state, _, score = jax.lax.while_loop(cond, body, (state, k1, mine(state)))
  return MatchResult(
    score=score, policy_seat=seats, length=state.step_count, truncated=state.truncated
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
  seats = np.asarray(result.policy_seat)
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
