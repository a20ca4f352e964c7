"""Values of true game states, with the chance that follows averaged exactly.

The agents that plan with the real game (`alphazero`, `tdlambda`) share one
rule for the value of a state reached in their lookahead, from the point of
view of a fixed `root_player` and with the config's per-transition discount:

* a decision node: the network's value of its observation (the mover's view),
  with the sign of the mover seen from `root_player` (-1 for an opponent in a
  two-player zero-sum game, as `search.mover_sign`);
* a terminal node: 0 (its reward is on the edge into it);
* a chance node: `sum_c p_c (r_c + discount * V(child_c))` over the outcomes
  of the game's `chance_probs` (one level, exact). A child that is itself a
  chance node (a forfeited turn in Nannon, rare) counts with the network's
  value of its own observation (the `Game.perspective` player's view): the
  lookahead stops there rather than branching C^2 ways.

The caller evaluates the network once on the observations of the states and
of their chance children (`observations`) and hands the values back
(`state_values`), so all network calls of one lookahead are one batch.
"""

from __future__ import annotations

from typing import Callable

import chex
import jax
import jax.numpy as jnp

import envs


def view_player(env: envs.Env, state: envs.State) -> chex.Array:
  """int32 `[...]`: whose view `state.observation` takes (the mover at a
  decision node, `Game.perspective` elsewhere)."""
  view = _batched(env.game.perspective, state.current_player.ndim)(state.game)
  return jnp.where(state.current_player >= 0, state.current_player, view).astype(jnp.int32)


def _batched(fn, ndim):
  for _ in range(ndim):
    fn = jax.vmap(fn)
  return fn


def sign(player: chex.Array, root_player: chex.Array, flip_opponents: bool) -> chex.Array:
  """+1 or -1: turns a value from `player`'s view into `root_player`'s."""
  return jnp.where(flip_opponents & (player != root_player), -1.0, 1.0)


def chance_children(env: envs.Env, state: envs.State) -> envs.State:
  """`[N, C]` states: every chance outcome applied to each of the `[N]`
  states (`env.step` explicit; meaningless but defined where a state is not a
  chance node or an outcome has probability 0: the caller weights them by
  `chance_probs`, zero there)."""
  outcomes = jnp.arange(env.num_chance_outcomes, dtype=jnp.int32)
  return jax.vmap(lambda s: jax.vmap(lambda c: env.step(s, c))(outcomes))(state)


def observations(state: envs.State, children: envs.State) -> chex.Array:
  """`[N + N * C, *obs]`: the states' observations, then their children's."""
  n, c = children.current_player.shape
  obs = children.observation.reshape((n * c,) + children.observation.shape[2:])
  return jnp.concatenate([state.observation, obs])


def state_values(
  env: envs.Env,
  state: envs.State,
  children: envs.State,
  values: chex.Array,
  root_player: chex.Array,
  *,
  discount: float,
) -> chex.Array:
  """`[N]` values of `state` `[N]` from `root_player` `[N]`'s view (the
  module's rule).

  Args:
    env: the game.
    state: `[N]` states.
    children: `[N, C]`, `chance_children(env, state)`.
    values: `[N + N * C]` network values of `observations(state, children)`,
      each from its observation's view (`view_player`).
    root_player: int32 `[N]`.
    discount: per-transition discount.
  """
  n, c = children.current_player.shape
  flip = env.payoff == "zero_sum"
  own, kids = values[:n], values[n:].reshape(n, c)
  own = sign(view_player(env, state), root_player, flip) * own
  kid_sign = sign(view_player(env, children), root_player[:, None], flip)
  kid_value = jnp.where(children.current_player == envs.TERMINAL, 0.0, kid_sign * kids)
  kid_reward = jnp.take_along_axis(
    children.rewards, jnp.broadcast_to(root_player[:, None, None], (n, c, 1)), axis=-1
  )[..., 0]
  expected = jnp.sum(state.chance_probs * (kid_reward + discount * kid_value), axis=-1)
  return jnp.where(
    state.current_player == envs.CHANCE,
    expected,
    jnp.where(state.current_player == envs.TERMINAL, 0.0, own),
  )


def one_ply_policy(
  env: envs.Env, value_fn: Callable[[chex.Array], chex.Array], *, discount: float
) -> envs.OnePlyPolicy:
  """TD-Gammon's 1-ply player on `env` with the value function `value_fn`
  (`[M, *obs]` observations -> `[M]` values, each from its observation's
  view): every move is tried on the real game and its successor valued by
  the module's rule, with one `value_fn` call for all successors and their
  chance children. TD(lambda) plays it with its value network
  (`tdlambda.one_ply_policy`), `evaluate.py --agent value` with a
  checkpoint's value head (`AgentSpec.value_policy`)."""

  def successor_value(state: envs.State, root_player: chex.Array) -> chex.Array:
    children = chance_children(env, state)
    values = value_fn(observations(state, children))
    return state_values(env, state, children, values, root_player, discount=discount)

  return envs.OnePlyPolicy(env=env, successor_value=successor_value, discount=discount)
