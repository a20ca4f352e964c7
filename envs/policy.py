"""The one policy contract, shared by the agent, the bots and every tool.

A `Policy` maps a batch of states (leading axis `B`) and one PRNG key to
int32 actions `[B]`:

    actions = policy(state, key)

State first, key last, as in `Env.step(state, action, key)`; keys are raw
uint32 `jax.random.PRNGKey`s everywhere. A policy is only read at decision
nodes: at chance nodes the caller draws the outcome with
`envs.chance_outcome`, and what a policy returns for a finished game or a
chance node is ignored. `anakin_mz.eval.match.play_match` is the one loop
that plays policies against each other.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp

from envs.core import State

Policy = Callable[[State, jax.Array], jax.Array]

# An unbatched player: `(state [], key) -> action []`.
SinglePolicy = Callable[[State, jax.Array], jax.Array]


def random_policy(state: State, key: jax.Array) -> jax.Array:
  """int32 `[B]`: uniformly random legal actions (0 where none is legal)."""
  logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
  logits = jnp.where(jnp.any(state.legal_action_mask, -1, keepdims=True), logits, 0.0)
  return jax.random.categorical(key, logits).astype(jnp.int32)


def per_game(single: SinglePolicy) -> Policy:
  """The `Policy` that runs the unbatched `single` on every game of the batch,
  each with its own key (`jax.random.split(key, B)`)."""

  def policy(state: State, key: jax.Array) -> jax.Array:
    keys = jax.random.split(key, state.current_player.shape[0])
    return jax.vmap(single)(state, keys).astype(jnp.int32)

  return policy
