"""The replay buffer's storage: a ring of self-play steps per lane
(`anakin_mz.core.replay`)."""

from __future__ import annotations

from typing import Optional

import chex
import jax
import jax.numpy as jnp

import envs


@chex.dataclass(frozen=True)
class Transition:
  """One env transition (self-play produces `[T, B]` of these).

  Attributes:
    observation: float32 `[*obs]`, the mover's view at decision steps.
    player: int32 `[]`, `current_player` at this step (>= 0 or `CHANCE`).
    action: int32 `[]`, the unified action taken (a, or A + chance outcome).
    rewards: float32 `[P]`, the rewards of this transition per absolute player.
    search_policy: float32 `[A]`, root visit distribution (0 at chance steps).
    search_value: float32 `[]`, root search value from `player`'s view (0 at
      chance steps).
    chance_probs: float32 `[C]`, the game's chance probabilities (0 at
      decision steps).
    next_player: int32 `[]`, `current_player` after the transition
      (`TERMINAL` if it ended the game).
    done: bool `[]`, the episode ended with this transition.
    truncated: bool `[]`, ... by truncation (the value is bootstrapped).
    valid: bool `[]`, False for padding steps (never sampled nor read).
    legal_action_mask: bool `[A]`, the legal moves (decision steps), or None:
      kept only by a buffer built with `example_transition(env,
      legal_mask=True)` (reanalyse searches the stored positions again).
    sibling_action: int32 `[S]`, the legal moves at a decision step in
      `S = env.max_legal_actions` slots, -1 in an unused slot and at chance
      steps; or None: kept only by a buffer built with
      `example_transition(env, siblings=True)` (`loss.sibling_value_loss`).
    sibling_q: float32 `[S]`, each slot's move valued one ply deep on the
      real game by the value head, `reward + discount * V(successor)` with
      the chance after it averaged exactly (`OnePlyPolicy.action_values`),
      from `player`'s view; 0 where `sibling_action` is -1. None as
      `sibling_action`.
  """

  observation: chex.Array
  player: chex.Array
  action: chex.Array
  rewards: chex.Array
  search_policy: chex.Array
  search_value: chex.Array
  chance_probs: chex.Array
  next_player: chex.Array
  done: chex.Array
  truncated: chex.Array
  valid: chex.Array
  legal_action_mask: Optional[chex.Array] = None
  sibling_action: Optional[chex.Array] = None
  sibling_q: Optional[chex.Array] = None


@chex.dataclass(frozen=True)
class BufferState:
  """data: `Transition` `[L, B, ...]`; write: int32 `[B]` next slot per lane;
  count: int32 `[B]` written steps per lane (<= L); added: int32 `[B]` steps
  ever added per lane."""

  data: Transition
  write: chex.Array
  count: chex.Array
  added: chex.Array

  @property
  def capacity(self) -> int:
    return self.data.player.shape[0]

  @property
  def num_lanes(self) -> int:
    return self.data.player.shape[1]


def example_transition(
  env: envs.Env, *, legal_mask: bool = False, siblings: bool = False
) -> Transition:
  """An all-zero, unbatched `Transition` with `env`'s shapes and dtypes; with
  `legal_mask` it holds the legal action mask too, with `siblings` the
  sibling moves and their values (else those fields are None)."""
  f32, i32 = jnp.float32, jnp.int32
  mask = jnp.zeros((env.num_actions,), jnp.bool_) if legal_mask else None
  slots = (env.max_legal_actions,)
  return Transition(
    observation=jnp.zeros(env.observation_shape, f32),
    player=jnp.zeros((), i32),
    action=jnp.zeros((), i32),
    rewards=jnp.zeros((env.num_players,), f32),
    search_policy=jnp.zeros((env.num_actions,), f32),
    search_value=jnp.zeros((), f32),
    chance_probs=jnp.zeros((env.num_chance_outcomes,), f32),
    next_player=jnp.zeros((), i32),
    done=jnp.zeros((), jnp.bool_),
    truncated=jnp.zeros((), jnp.bool_),
    valid=jnp.zeros((), jnp.bool_),
    legal_action_mask=mask,
    sibling_action=jnp.full(slots, -1, i32) if siblings else None,
    sibling_q=jnp.zeros(slots, f32) if siblings else None,
  )


def init_buffer(example: Transition, capacity_steps: int, num_lanes: int) -> BufferState:
  """An empty buffer of `capacity_steps` x `num_lanes` steps shaped like
  `example` (one unbatched `Transition`)."""
  if capacity_steps < 1 or num_lanes < 1:
    raise ValueError(
      f"capacity_steps and num_lanes must be >= 1, got {capacity_steps} and {num_lanes}"
    )
  data = jax.tree.map(
    lambda x: jnp.zeros((capacity_steps, num_lanes) + jnp.shape(x), jnp.asarray(x).dtype), example
  )
  zero = jnp.zeros((num_lanes,), jnp.int32)
  return BufferState(data=data, write=zero, count=zero, added=zero)


def lane_get(x: chex.Array, t: chex.Array) -> chex.Array:
  """`x[t[s, b], b]` for `x` `[L, B, ...]` and times `t` `[S, B]` -> `[S, B, ...]`:
  one gather indexed by (time, lane). The step runs under `shard_map`, so
  the lanes here are the device's own and no index crosses devices."""
  return x[t, jnp.arange(x.shape[1])[None, :]]


def lane_set(x: chex.Array, t: chex.Array, v: chex.Array, mode=None) -> chex.Array:
  """`x.at[t[s, b], b].set(v[s, b])`: one scatter indexed by (time, lane).
  Not a scatter per lane under `vmap`: XLA's CPU backend lowers that one
  (batched over the lane axis, the second) to a pass over the whole of `x`,
  100 ms for a 16-step chunk into a 2,048 x 32 replay of MinAtar's
  600-float planes against 0.1 ms for this form, under a seed `vmap` too
  (a third of `scripts/benchmark_train.py`'s MinAtar step went there)."""
  return x.at[t, jnp.arange(x.shape[1])[None, :]].set(v.astype(x.dtype), mode=mode)


def add(buffer: BufferState, chunk: Transition, *, drop_invalid: bool = False) -> BufferState:
  """Writes `chunk` (`Transition` `[T, B, ...]`) after each lane's newest
  step, overwriting the oldest ones once the lane's ring is full.

  Args:
    buffer: the buffer.
    chunk: `[T, B, ...]` steps in time order per lane.
    drop_invalid: False writes all T steps of every lane (T <= L), invalid
      ones included: an invalid step then ends its lane's data as padding
      does (`sample`). True writes only the valid steps of each lane, packed,
      so lane b advances by its own count `sum(chunk.valid[:, b])`; if that
      exceeds L only the newest L are kept.

  The buffer decides what is kept: a chunk's `legal_action_mask` (or its
  siblings) is dropped by a buffer built without one.
  """
  if buffer.data.legal_action_mask is None:
    chunk = chunk.replace(legal_action_mask=None)
  elif chunk.legal_action_mask is None:
    raise ValueError("the buffer keeps legal action masks, the chunk has none")
  if buffer.data.sibling_q is None:
    chunk = chunk.replace(sibling_action=None, sibling_q=None)
  elif chunk.sibling_q is None:
    raise ValueError(
      "the buffer keeps sibling values (loss.sibling_value_weight), the chunk has none"
    )
  cap = buffer.capacity
  t = chunk.player.shape[0]
  if chunk.player.shape[1:] != (buffer.num_lanes,):
    raise ValueError(f"chunk has lanes {chunk.player.shape[1:]}, the buffer has {buffer.num_lanes}")
  chex.assert_rank(buffer.data.player, 2, custom_message="BufferState.data.player must be [L, B]")
  for (path, d), c in zip(
    jax.tree_util.tree_flatten_with_path(buffer.data)[0], jax.tree.leaves(chunk), strict=True
  ):
    name = jax.tree_util.keystr(path)
    chex.assert_shape(
      c, (t,) + d.shape[1:], custom_message=f"chunk{name} vs the buffer's [T, B, ...]"
    )
  if not drop_invalid:
    if t > cap:
      raise ValueError(f"chunk of {t} steps does not fit a buffer of {cap} steps")
    slots = (buffer.write + jnp.arange(t)[:, None]) % cap  # [T, B]
    n = jnp.full((buffer.num_lanes,), t, jnp.int32)
    data = jax.tree.map(lambda d, c: lane_set(d, slots, c), buffer.data, chunk)
  else:
    valid = chunk.valid.astype(bool)
    rank = jnp.cumsum(valid, axis=0, dtype=jnp.int32) - 1  # [T, B]
    n = jnp.sum(valid, axis=0, dtype=jnp.int32)  # [B]
    keep = valid & (rank >= n - cap)  # the newest L
    slots = jnp.where(keep, (buffer.write + rank) % cap, cap)  # cap: dropped
    data = jax.tree.map(lambda d, c: lane_set(d, slots, c, mode="drop"), buffer.data, chunk)
  return BufferState(
    data=data,
    write=(buffer.write + n) % cap,
    count=jnp.minimum(buffer.count + n, cap),
    added=buffer.added + n,
  )
