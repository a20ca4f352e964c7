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

_BLOCK = 32


def random_legal_action(mask: jax.Array, key: jax.Array) -> jax.Array:
  """int32 `[...]`: a uniformly random True index of `mask` `[..., A]` (0
  where no entry is True). The one random-move rule, for `random_policy`, the
  UCT rollouts, the tests and the benchmarks.

  One uniform per row picks the k-th legal action, k = floor(u * count). The
  running count is a matmul with a triangular matrix for small A and counts
  in blocks of 32 for large A (both give the same action for the same u):
  much cheaper on CPU than a categorical, and `jnp.cumsum` over A is a
  quadratic reduce_window there.
  """
  a = mask.shape[-1]
  m = mask.astype(jnp.int32)
  if a <= 2 * _BLOCK:
    running = m.astype(jnp.float32) @ jnp.triu(jnp.ones((a, a), jnp.float32))
    total = running[..., -1].astype(jnp.int32)
    k = _kth(key, total)
    return jnp.where(total > 0, jnp.argmax(running > k[..., None], -1), 0).astype(jnp.int32)
  nb = -(-a // _BLOCK)
  pad = [(0, 0)] * (mask.ndim - 1) + [(0, nb * _BLOCK - a)]
  m = jnp.pad(m, pad).reshape(mask.shape[:-1] + (nb, _BLOCK))
  counts = m.sum(-1)
  total = counts.sum(-1)
  k = _kth(key, total)
  ends = jnp.cumsum(counts, -1)
  block = jnp.argmax(ends > k[..., None], -1)
  before = jnp.take_along_axis(ends - counts, block[..., None], -1)[..., 0]
  row = jnp.take_along_axis(m, block[..., None, None], -2)[..., 0, :]
  inner = jnp.argmax(jnp.cumsum(row, -1) > (k - before)[..., None], -1)
  return jnp.where(total > 0, block * _BLOCK + inner, 0).astype(jnp.int32)


def _kth(key: jax.Array, total: jax.Array) -> jax.Array:
  k = jnp.floor(jax.random.uniform(key, total.shape) * total).astype(jnp.int32)
  return jnp.minimum(k, jnp.maximum(total - 1, 0))


def random_policy(state: State, key: jax.Array) -> jax.Array:
  """int32 `[B]`: uniformly random legal actions (0 where none is legal)."""
  return random_legal_action(state.legal_action_mask, key)


def per_game(single: SinglePolicy) -> Policy:
  """The `Policy` that runs the unbatched `single` on every game of the batch,
  each with its own key (`jax.random.split(key, B)`)."""

  def policy(state: State, key: jax.Array) -> jax.Array:
    keys = jax.random.split(key, state.current_player.shape[0])
    return jax.vmap(single)(state, keys).astype(jnp.int32)

  return policy
