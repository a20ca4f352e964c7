"""The one policy contract, shared by the agent, the bots and every tool.

A `Policy` maps a batch of states (leading axis `B`) and one PRNG key to
int32 actions `[B]`:

    actions = policy(state, key)

State first, key last, as in `Env.step(state, action, key)`; the key may
be of either flavour (`jax.random.key` or `jax.random.PRNGKey`, see
`envs.raw_key`). A policy is only read at decision
nodes: at chance nodes the caller draws the outcome with
`envs.chance_outcome`, and what a policy returns for a finished game or a
chance node is ignored. `anakin_mz.eval.match.play_match` is the one loop
that plays policies against each other.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Tuple

import jax
import jax.numpy as jnp

from envs.core import Env, State

Policy = Callable[[State, jax.Array], jax.Array]

# An unbatched player: `(state [], key) -> action []`.
SinglePolicy = Callable[[State, jax.Array], jax.Array]

_WORD = 32
_UNROLL_WORDS = 16  # up to 512 actions; beyond, a running count over the words


def random_legal_action(mask: jax.Array, key: jax.Array) -> jax.Array:
  """int32 `[...]`: a uniformly random True index of `mask` `[..., A]` (0
  where no entry is True). The one random-move rule, for `random_policy`, the
  UCT rollouts, the tests and the benchmarks.

  One uniform per row picks the k-th legal action (from 0), k = floor(u *
  count). The mask is packed into 32-bit words; the word holding the k-th
  True is found from the words' population counts, and the bit inside it by
  a binary search on the population counts of its halves. Only elementwise
  integer work on `[..., ceil(A / 32)]`: on CPU a running count over A (a
  triangular matmul, or `jnp.cumsum`, which XLA lowers to a quadratic
  reduce_window) costs 15-20x more at A = 75.
  """
  a = mask.shape[-1]
  nw = -(-a // _WORD)
  pad = [(0, 0)] * (mask.ndim - 1) + [(0, nw * _WORD - a)]
  bits = jnp.pad(mask.astype(jnp.uint32), pad).reshape(mask.shape[:-1] + (nw, _WORD))
  words = jnp.sum(bits << jnp.arange(_WORD, dtype=jnp.uint32), -1, dtype=jnp.uint32)
  counts = jax.lax.population_count(words).astype(jnp.int32)  # [..., nw]
  total = jnp.sum(counts, -1)
  k = _kth(key, total)
  # The word that holds the k-th True: unrolled over the (few) words.
  if nw <= _UNROLL_WORDS:
    block = before = seen = jnp.zeros_like(k)
    word = jnp.zeros_like(words[..., 0])
    for i in range(nw):
      here = (seen <= k) & (k < seen + counts[..., i])
      block = jnp.where(here, i, block)
      before = jnp.where(here, seen, before)
      word = jnp.where(here, words[..., i], word)
      seen = seen + counts[..., i]
  else:
    ends = jnp.cumsum(counts, -1)
    block = jnp.sum(ends <= k[..., None], -1)
    before = jnp.take_along_axis(ends - counts, block[..., None], -1)[..., 0]
    word = jnp.take_along_axis(words, block[..., None], -1)[..., 0]
  # The j-th set bit of `word`: halve the window 16, 8, 4, 2, 1.
  j, bit = k - before, jnp.zeros_like(k)
  for width in (16, 8, 4, 2, 1):
    low = jax.lax.population_count(word & jnp.uint32((1 << width) - 1)).astype(jnp.int32)
    up = j >= low
    j = jnp.where(up, j - low, j)
    word = jnp.where(up, word >> width, word)
    bit = jnp.where(up, bit + width, bit)
  return jnp.where(total > 0, block * _WORD + bit, 0).astype(jnp.int32)


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


# `(states [M], root_player int32 [M]) -> float32 [M]`: the value of states
# reached by a move, from `root_player`'s view.
SuccessorValue = Callable[[State, jax.Array], jax.Array]


def legal_slots(mask: jax.Array, size: int):
  """The legal actions of `mask` `[B, A]` as slots: (actions int32 `[B, size]`
  ascending, 0-padded; valid bool `[B, size]`). Legal actions beyond `size`
  are dropped."""
  actions = jax.vmap(lambda m: jnp.nonzero(m, size=size, fill_value=0)[0])(mask)
  valid = jnp.arange(size) < jnp.sum(mask, -1, keepdims=True)
  return actions.astype(jnp.int32), valid


@dataclasses.dataclass(frozen=True, eq=False)
class OnePlyPolicy:
  """A `Policy` that tries every move on the real game and plays the legal
  one of highest `reward + discount * successor_value(successor, mover)`
  (TD-Gammon's 1-ply search; the first of equals; 0 where none is legal).
  `successor_value` may itself look further ahead
  (`anakin_mz.core.lookahead.expectimax_policy` of depth 2 and more).

  Its choice depends on a successor only through `successor_value`, so a game
  whose states can be enumerated may evaluate that once per distinct
  successor instead of once per (state, move): Nannon's exact evaluator
  does (`envs.nannon_solver.one_ply_table`). Calling the policy is the
  reference that such a shortcut must reproduce bit for bit.

  Attributes:
    env: the game the moves are tried on.
    successor_value: `(states [M], root_player [M]) -> [M]`, float32 values
      of the states reached, from the view of `root_player` (the mover); 0
      for a finished game, whose reward is on the move's edge.
    discount: per-transition discount.
  """

  env: Env
  successor_value: SuccessorValue
  discount: float

  def action_values(self, state: State) -> jax.Array:
    """float32 `[B, A]`: every legal action's value from the mover's view
    (0 at the illegal ones). Only the legal moves are tried, in
    `env.max_legal_actions` slots (`legal_slots`), so a game of many actions
    and few legal moves (EinStein: 75 and 6) costs its legal moves, not its
    action space."""
    num_envs, num_actions = state.legal_action_mask.shape
    slots = self.env.max_legal_actions
    mover = jnp.maximum(state.current_player, 0).astype(jnp.int32)
    actions, valid = legal_slots(state.legal_action_mask, slots)
    succ = jax.vmap(lambda s, a: jax.vmap(lambda b: self.env.step(s, b))(a))(state, actions)
    flat = jax.tree.map(lambda x: x.reshape((num_envs * slots,) + x.shape[2:]), succ)
    root = jnp.repeat(mover, slots)
    v = self.successor_value(flat, root)
    r = jnp.take_along_axis(flat.rewards, root[:, None], axis=-1)[:, 0]
    q = (r + self.discount * v).reshape(num_envs, slots)
    # Padded slots repeat action 0: they write out of bounds and are dropped.
    column = jnp.where(valid, actions, num_actions)
    rows = jnp.arange(num_envs)[:, None]
    return jnp.zeros((num_envs, num_actions), q.dtype).at[rows, column].set(q, mode="drop")

  def choose(self, state: State) -> Tuple[jax.Array, jax.Array]:
    """(action int32 `[B]`, its value float32 `[B]`, 0 where no move is legal)."""
    legal = state.legal_action_mask
    masked = jnp.where(legal, self.action_values(state), -jnp.inf)
    action = jnp.argmax(masked, axis=-1).astype(jnp.int32)
    value = jnp.where(jnp.any(legal, axis=-1), jnp.max(masked, axis=-1), 0.0)
    return action, value

  def __call__(self, state: State, key: jax.Array) -> jax.Array:
    del key  # deterministic
    return self.choose(state)[0]
