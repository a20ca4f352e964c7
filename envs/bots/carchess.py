"""Carchess's bot (registered as `greedy`), the hand-written heuristic.

`greedy_policy(game)` plays one unbatched `envs.State` at a decision node,
`(state, key) -> action []`; the registered bot is its batched
`envs.Policy` (`envs.policy.per_game`).

`greedy`: the simulation of a round is deterministic once the
round's toggles are chosen (chance only acts between rounds), so the mover
tries every light it may toggle together with the best light a later player of
the round may still toggle, runs the round's `sim_steps` simulation steps on a
copy of the board plus `extra_steps` more with the lights left as they are
(none after the last round), and picks the light with the highest summed
reward. The extra steps let it see cars released at a light, which need more
than one round of 5 steps to reach the end on "tutorial". The last mover of a
round only tries its own light; with more than two players, the toggles of the
players after the next one are ignored. Ties are broken at random.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from envs.bots import Bot, register_bot
from envs.carchess import Carchess
from envs.core import State
from envs.policy import SinglePolicy, per_game


def round_rewards(game: Carchess, g, extra_steps: int = 0) -> jax.Array:
  """float32 `[lights, lights]`: the reward of simulating the current round
  after toggling lights a and b (entry [a, a]: light a alone) on top of the
  toggles already made this round, plus `extra_steps` further steps with the
  same lights unless this is the last round."""
  k = game.num_lights
  eye = jnp.eye(k, dtype=jnp.bool_)
  flips = eye[:, None, :] | eye[None, :, :]  # [a, b, light]
  more = g.round < game.params["rounds"] - 1

  def run(flip):
    g2, reward = game.simulate(g.replace(red=g.red ^ flip), game.params["sim_steps"])
    if extra_steps:
      reward = reward + jnp.where(more, game.simulate(g2, extra_steps)[1], 0.0)
    return reward

  return jax.vmap(jax.vmap(run))(flips)


def greedy_policy(game: Carchess, extra_steps: int = 4) -> SinglePolicy:
  """The greedy lookahead policy for `game` (see the module doc)."""
  if extra_steps < 0:
    raise ValueError(f"extra_steps must be >= 0, got {extra_steps}")
  light_cells = jnp.asarray(game._light_cells)
  n = game.num_players

  def policy(state: State, key: jax.Array) -> jax.Array:
    g = state.game
    free = ~g.toggled  # [lights]
    values = round_rewards(game, g, extra_steps)
    others = free[None, :] & ~jnp.eye(game.num_lights, dtype=jnp.bool_)
    with_partner = jnp.max(jnp.where(others, values, -jnp.inf), axis=1)
    alone = jnp.diagonal(values)
    last = g.turn >= n - 1
    value = jnp.where(last | ~others.any(1), alone, with_partner)
    value = jnp.where(free, value, -jnp.inf)
    best = value >= jnp.max(value) - 1e-6
    pick = jax.random.categorical(key, jnp.where(best, 0.0, -jnp.inf))
    return light_cells[pick].astype(jnp.int32)

  return policy


register_bot(
  Bot(
    "greedy",
    lambda env: per_game(greedy_policy(env.game)),
    games=("carchess",),
    needs="a one-round lookahead heuristic",
  )
)
