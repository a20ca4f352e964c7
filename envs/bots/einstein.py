"""EinStein's bot (registered as `expectiminimax[:D]`): a `envs.Policy`.

* `make_expectiminimax_policy(env, depth)`: depth-limited expectiminimax.
  `depth` counts the moves searched: 1 is greedy, 2 looks at every reply to
  every die roll, and so on. Every die roll after a move is averaged with
  probability 1/6; won/lost games score +1/-1 and the leaves are scored by
  `evaluate` (default `race_evaluation`), which stays inside (-1, 1) so that
  a sure win always beats a good position. Ties at the root are broken at
  random.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from envs.bots import Bot, register_bot
from envs.core import Env
from envs.einstein import NUM_PIECES, SIZE, Einstein, EinsteinState, selectable, view_squares
from envs.policy import Policy, per_game

Evaluation = Callable[[EinsteinState, jax.Array], jax.Array]


def race_evaluation(g: EinsteinState, player: jax.Array) -> jax.Array:
  """float32 `[]` in (-0.9, 0.9): how far ahead `player` is in the race.

  For each side and each die face, the fewest moves to the goal corner among
  the pieces that face lets move (Chebyshev distance); a side's race length
  is the mean over the six faces. The score is 0.9 * tanh of half the
  opponent's race length minus the player's.
  """

  def race(side):
    pos = jnp.where(side == 0, g.pos[0], g.pos[1])
    sq = view_squares(pos, side)
    dist = jnp.maximum(SIZE - 1 - sq // SIZE, SIZE - 1 - sq % SIZE)
    dist = jnp.where(pos >= 0, dist, 2 * SIZE)
    sel = jax.vmap(lambda face: selectable(pos, face))(jnp.arange(NUM_PIECES))
    best = jnp.min(jnp.where(sel, dist[None], 2 * SIZE), axis=-1)
    return jnp.mean(best.astype(jnp.float32))

  player = jnp.asarray(player, jnp.int32)
  return 0.9 * jnp.tanh(0.5 * (race(1 - player) - race(player)))


def legal_actions(game: Einstein, g: EinsteinState):
  """The legal actions of decision state `g`: int32 `[6]`
  (`max_legal_actions`; padded with 0) and a bool `[6]` validity mask."""
  (idx,) = jnp.nonzero(game.legal_action_mask(g), size=game.max_legal_actions, fill_value=-1)
  return jnp.maximum(idx, 0).astype(jnp.int32), idx >= 0


def expectiminimax_values(
  game: Einstein, g: EinsteinState, depth: int, evaluate: Evaluation = race_evaluation
):
  """Expectiminimax values of the moves of decision state `g` (unbatched).

  Args:
    game: the `Einstein` game core.
    g: a decision state (a die has been rolled).
    depth: moves to search, >= 1 (a Python int: the tree is unrolled).
    evaluate: `evaluate(g, player) -> float32 []`, a leaf score for `player`
      inside (-1, 1).

  Returns:
    (actions int32 `[6]`, valid bool `[6]`, values float32 `[6]`): the legal
    actions, which slots hold one, and each move's value for the mover.
  """
  if depth < 1:
    raise ValueError(f"expectiminimax depth must be >= 1, got {depth}")
  root = g.to_move

  def after_move(h, left):
    # h: the state after a move, before the next die roll.
    won = jnp.where(h.winner == root, 1.0, -1.0)
    if left == 0:
      value = evaluate(h, root)
    else:
      rolls = jax.vmap(lambda face: game.apply_chance(h, face)[0])(jnp.arange(NUM_PIECES))
      value = jnp.mean(jax.vmap(lambda r: decision(r, left))(rolls))
    return jnp.where(h.winner >= 0, won, value)

  def children(h, left):
    actions, valid = legal_actions(game, h)
    kids = jax.vmap(lambda a: game.apply_action(h, a)[0])(actions)
    return actions, valid, jax.vmap(lambda k: after_move(k, left - 1))(kids)

  def decision(h, left):
    _, valid, values = children(h, left)
    best = jnp.max(jnp.where(valid, values, -jnp.inf))
    worst = jnp.min(jnp.where(valid, values, jnp.inf))
    return jnp.where(h.to_move == root, best, worst)

  return children(g, depth)


def make_expectiminimax_policy(
  env: Env, depth: int = 2, evaluate: Evaluation = race_evaluation
) -> Policy:
  """A batched expectiminimax policy searching `depth` moves (see module doc).

  Raises:
    ValueError: `env` is not an `einstein` env, or depth < 1.
  """
  game = env.game
  if not isinstance(game, Einstein):
    raise ValueError(f"expectiminimax needs an einstein env, got {env.id!r}")
  if not isinstance(depth, int) or depth < 1:
    raise ValueError(f"expectiminimax depth must be an int >= 1, got {depth!r}")

  def at_decision(state, key):
    actions, valid, values = expectiminimax_values(game, state.game, depth, evaluate)
    noise = jax.random.uniform(key, values.shape, maxval=1e-6)
    return actions[jnp.argmax(jnp.where(valid, values + noise, -jnp.inf))]

  return per_game(at_decision)


register_bot(
  Bot(
    "expectiminimax",
    make_expectiminimax_policy,
    games=("einstein",),
    needs="a game with an expectiminimax evaluation",
    arg="depth",
    default=2,
  )
)
