"""Jittable Carchess policies: `random` and the `greedy` heuristic.

A policy maps `(state, key)` to an int32 `[]` action, for one unbatched
`envs.State` at a decision node (vmap it for a batch). Build one with
`make_policy(env, name)`.

`greedy` (hand-written): the simulation of a round is deterministic once the
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

from typing import Callable

import jax
import jax.numpy as jnp

from envs.carchess import Carchess
from envs.core import Env, State

Policy = Callable[[State, jax.Array], jax.Array]

POLICIES = ("random", "greedy")


def random_policy(state: State, key: jax.Array) -> jax.Array:
  """int32 `[]`: a uniformly random legal action."""
  logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
  return jax.random.categorical(key, logits).astype(jnp.int32)


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


def greedy_policy(game: Carchess, extra_steps: int = 4) -> Policy:
  """The greedy lookahead policy for `game` (see the module doc)."""
  if extra_steps < 0:
    raise ValueError(f"extra_steps must be >= 0, got {extra_steps}")
  light_cells = jnp.asarray(game._light_cells)  # pylint: disable=protected-access
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


def make_policy(env: Env, name: str) -> Policy:
  """The policy `name` (one of `POLICIES`) for a carchess `env`."""
  if not isinstance(env.game, Carchess):
    raise ValueError(f"carchess policies need a carchess env, got {env.id!r}")
  if name == "random":
    return random_policy
  if name == "greedy":
    return greedy_policy(env.game)
  raise ValueError(f"unknown carchess policy {name!r}; valid: {', '.join(POLICIES)}")


def play(env: Env, policy: Policy, key: jax.Array, num_games: int) -> jax.Array:
  """float32 `[num_games]`: each game's score (player 0's summed reward), all
  players following `policy`, chance sampled. Jittable for a fixed `num_games`."""
  k0, k1 = jax.random.split(key)
  s = jax.vmap(env.reset)(jax.random.split(k0, num_games))

  def body(carry, k):
    s, total = carry
    ka, kc = jax.random.split(k)
    a = jax.vmap(policy)(s, jax.random.split(ka, num_games))
    a = jnp.where(s.done, 0, a)
    s = jax.vmap(env.step)(s, a, jax.random.split(kc, num_games))
    return (s, total + s.rewards[:, 0]), None

  steps = env.game.params["rounds"] * env.num_players
  (s, total), _ = jax.lax.scan(body, (s, jnp.zeros((num_games,))),
                               jax.random.split(k1, steps))
  return total
