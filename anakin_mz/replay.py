"""On-device replay: a pure-JAX ring buffer of self-play steps, and the
K-step training targets of NDMZ (eq. 1) sampled from it.

Why not flashbax (0.1.3, checked): its trajectory buffer is batch-major and
samples fixed-length windows uniformly over all start times. We need starts
at decision steps only, targets that stop at the episode's end (absorbing
past it), Monte-Carlo returns that look to the episode's end however far it
is, bootstrapping at truncation and at the write head, and a point of view
that depends on the start's mover. That is target making over the whole lane,
not windowing, so flashbax would only store arrays for us; this module does
that in a few lines and keeps every index rule in one place.

Layout: `BufferState.data` is a `Transition` with leading axes `[L, B]`
(time-major, one column per self-play lane, L = capacity in time steps). Each
lane is a ring of its own: `write[b]` is its next slot and `count[b]` its
number of written steps, so its logical time order is
`(write[b] - count[b]) % L, ...` up to `write[b] - 1`. A chunk `[T, B]` is
written into all lanes at once; with `drop_invalid=True` only each lane's
valid steps are written, packed in time order, so lanes that played different
numbers of transitions (self-play that skips the search at chance nodes)
leave no padding between chunks.

Targets (see `sample`), all from the point of view of the player to move at
the start step t (the "root mover", `anakin_mz.types`):

* value z_{t+k}: the discounted sum of rewards from t+k to the episode's end
  (`td_steps=0`, the default), or the n-step return bootstrapped from the
  search value of the first decision step at or after t+k+n. Where the data
  stops before the episode ends -- truncation (the env gives no value there)
  or the write head (the game goes on) -- the tail is replaced by the search
  value of the last decision step before the stop.
* reward u_{t+k}, identity of the next mover (relative player, chance or
  terminal), choice policy (search visits, masked off-turn) and chance policy
  (the game's probabilities, masked at decision steps).
* past the end of the episode: identity terminal, reward 0, value 0, both
  policy masks off, and a uniformly random unified action is fed to g.

A start t is sampled only if it is a valid decision step and the K steps after
it are known: the episode ends within them, or t+K is written in the same
lane. So no sample reads across the write head or into unwritten slots.

Cost: `prepare` derives the targets of the whole buffer with parallel scans
(O(L B P) work, no Python loop); `sample_prepared` then gathers N x (K+1)
entries. `sample` does both; the learner prepares once per self-play chunk
and draws all of that chunk's batches from it. For a
256 x 128 Nannon buffer, batch 256, K=6 that is ~22 ms beside ~145 ms for one
gradient of the paper's MLP on a 2-core CPU
(`pytest -s -m slow tests/test_replay.py -k costs`).
"""

from __future__ import annotations

import types
from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp

import envs
from envs.core import CHANCE, PAYOFF_KINDS
from anakin_mz.types import relative_identity, terminal_identity


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


@chex.dataclass(frozen=True)
class Batch:
  """N training samples of K unroll steps; targets from the start mover's view.

  Attributes:
    observation: `[N, *obs]` at the start step.
    actions: int32 `[N, K]` unified actions fed to g (random past the end).
    target_value: `[N, K+1]`.
    target_reward: `[N, K]`, reward of action k.
    target_policy: `[N, K+1, A]` search visits; policy_mask `[N, K+1]` bool.
    target_chance: `[N, K+1, C]` chance probs; chance_mask `[N, K+1]` bool.
    target_identity: int32 `[N, K]`, identity class of the state reached by
      action k (`types.relative_identity`; terminal past the end).
    successor_observation: `[N, K, *obs]` the observation at step t+k
      (k = 1..K) where it is a decision step of the episode
      (`policy_mask[:, 1:]`: its mover's view, what h is trained on), zeros
      elsewhere; or None (a batch built by hand without it). Read by the
      successor-value term (`loss.successor_value_loss`).
  """

  observation: chex.Array
  actions: chex.Array
  target_value: chex.Array
  target_reward: chex.Array
  target_policy: chex.Array
  policy_mask: chex.Array
  target_chance: chex.Array
  chance_mask: chex.Array
  target_identity: chex.Array
  successor_observation: Optional[chex.Array] = None


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


def example_transition(env: envs.Env, *, legal_mask: bool = False) -> Transition:
  """An all-zero, unbatched `Transition` with `env`'s shapes and dtypes; with
  `legal_mask` it holds the legal action mask too (else that field is None)."""
  f32, i32 = jnp.float32, jnp.int32
  mask = jnp.zeros((env.num_actions,), jnp.bool_) if legal_mask else None
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


def _lane_get(x: chex.Array, t: chex.Array) -> chex.Array:
  """`x[t[s, b], b]` for `x` `[L, B, ...]` and times `t` `[S, B]` -> `[S, B, ...]`.
  A gather per lane (vmapped), not one with a lane index: a partitioner
  that splits the lanes over devices keeps it on each device."""
  return jax.vmap(lambda xl, tl: xl[tl], in_axes=(1, 1), out_axes=1)(x, t)


def _lane_set(x: chex.Array, t: chex.Array, v: chex.Array, mode=None) -> chex.Array:
  """`x.at[t[s, b], b].set(v[s, b])` per lane (vmapped, as `_lane_get`)."""
  return jax.vmap(lambda xl, tl, vl: xl.at[tl].set(vl, mode=mode), in_axes=(1, 1, 1), out_axes=1)(
    x, t, v.astype(x.dtype)
  )


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

  The buffer decides what is kept: a chunk's `legal_action_mask` is dropped
  by a buffer built without one.
  """
  if buffer.data.legal_action_mask is None:
    chunk = chunk.replace(legal_action_mask=None)
  elif chunk.legal_action_mask is None:
    raise ValueError("the buffer keeps legal action masks, the chunk has none")
  cap = buffer.capacity
  t = chunk.player.shape[0]
  if chunk.player.shape[1:] != (buffer.num_lanes,):
    raise ValueError(f"chunk has lanes {chunk.player.shape[1:]}, the buffer has {buffer.num_lanes}")
  jax.tree.map(lambda d, c: chex.assert_shape(c, (t,) + d.shape[1:]), buffer.data, chunk)
  if not drop_invalid:
    if t > cap:
      raise ValueError(f"chunk of {t} steps does not fit a buffer of {cap} steps")
    slots = (buffer.write + jnp.arange(t)[:, None]) % cap  # [T, B]
    n = jnp.full((buffer.num_lanes,), t, jnp.int32)
    data = jax.tree.map(lambda d, c: _lane_set(d, slots, c), buffer.data, chunk)
  else:
    valid = chunk.valid.astype(bool)
    rank = jnp.cumsum(valid, axis=0, dtype=jnp.int32) - 1  # [T, B]
    n = jnp.sum(valid, axis=0, dtype=jnp.int32)  # [B]
    keep = valid & (rank >= n - cap)  # the newest L
    slots = jnp.where(keep, (buffer.write + rank) % cap, cap)  # cap: dropped
    data = jax.tree.map(lambda d, c: _lane_set(d, slots, c, mode="drop"), buffer.data, chunk)
  return BufferState(
    data=data,
    write=(buffer.write + n) % cap,
    count=jnp.minimum(buffer.count + n, cap),
    added=buffer.added + n,
  )


# ------------------------------------------------------- whole-buffer targets


def _check(num_players: int, payoff: str, td_steps: int, discount: float):
  if payoff not in PAYOFF_KINDS:
    raise ValueError(f"payoff must be one of {PAYOFF_KINDS}, got {payoff!r}")
  if payoff == "zero_sum" and num_players != 2:
    raise ValueError(
      f"zero_sum targets need num_players == 2 (one scalar value per view), got {num_players}"
    )
  if td_steps < 0:
    raise ValueError(f"td_steps must be >= 0 (0: Monte-Carlo), got {td_steps}")
  if not 0.0 < discount <= 1.0:
    raise ValueError(f"discount must be in (0, 1], got {discount}")


_STEP_FIELDS = (
  "player",
  "action",
  "rewards",
  "search_value",
  "next_player",
  "done",
  "truncated",
  "valid",
)


def _rev_cummin(x: chex.Array) -> chex.Array:
  return jax.lax.cummin(x, axis=0, reverse=True)


class _Lanes:
  """Per-step facts of the buffer in logical (oldest-first) time order, each
  `[L, B]` unless noted; shared by the value targets and the sampler. Each
  lane is its own ring, so logical time is per lane.

  Attributes:
    slot_of: int32 `[L, B]`, a lane's logical time -> its physical slot.
    steps: the `_STEP_FIELDS` of the transitions, in logical order.
    valid: a written, valid step.
    decision: a valid step at a decision node.
    done: a valid step that ends its episode.
    terminated: `done` by the rules (not truncated).
    time: int32 logical time of each step.
    segment_end: int32 last step of the step's segment (its episode, or the
      data's end if cut off there); L where there is none.
    done_at_end: the segment ends with the episode's end.
    next_decision: int32 first decision step at or after each step (L: none).
    decision_after: int32 first decision step after each step (L: none).
    bootstrap: the last decision step of a segment cut off before a terminal:
      its search value stands in for the unknown rest of the episode.
    start_ok: a valid start for a K-step unroll.
  """

  def __init__(self, buffer: BufferState, k: int):
    cap = buffer.capacity
    oldest = (buffer.write - buffer.count) % cap  # [B]
    self.slot_of = (oldest + jnp.arange(cap)[:, None]) % cap
    steps = types.SimpleNamespace(
      **{f: _lane_get(getattr(buffer.data, f), self.slot_of) for f in _STEP_FIELDS}
    )
    self.steps = steps
    written = jnp.arange(cap)[:, None] < buffer.count[None, :]
    self.valid = written & steps.valid
    self.decision = self.valid & (steps.player >= 0)
    self.done = self.valid & steps.done
    self.terminated = self.done & ~steps.truncated
    valid_next = jnp.concatenate([self.valid[1:], jnp.zeros_like(self.valid[:1])], axis=0)
    data_stops = self.valid & ~self.done & ~valid_next
    self.time = jnp.broadcast_to(jnp.arange(cap)[:, None], self.valid.shape)
    never = jnp.int32(cap)
    self.segment_end = _rev_cummin(jnp.where(self.done | data_stops, self.time, never))
    end_slot = jnp.minimum(self.segment_end, cap - 1)
    self.done_at_end = jnp.take_along_axis(self.done, end_slot, axis=0)
    terminated_at_end = jnp.take_along_axis(self.terminated, end_slot, axis=0)
    self.next_decision = _rev_cummin(jnp.where(self.decision, self.time, never))
    self.decision_after = jnp.concatenate(
      [self.next_decision[1:], jnp.full_like(self.next_decision[:1], never)], axis=0
    )
    self.bootstrap = self.decision & (self.decision_after > self.segment_end) & ~terminated_at_end
    self.start_ok = self.decision & (self.done_at_end | (self.time + k <= self.segment_end))


def _backward_sums(a: chex.Array, b: chex.Array) -> chex.Array:
  """G with `G_i = b_i + a_i G_{i+1}` along axis 0 (G past the end is 0): a
  linear recurrence solved by a parallel scan. `a` broadcasts against `b`."""

  def compose(later, earlier):
    a_l, b_l = later
    a_e, b_e = earlier
    return a_e * a_l, b_e + a_e * b_l

  a = jnp.broadcast_to(a, b.shape)
  return jax.lax.associative_scan(compose, (a, b), reverse=True, axis=0)[1]


def _values_by_player(
  values: chex.Array, player: chex.Array, num_players: int, payoff: str
) -> chex.Array:
  """`[...]` values from `player`'s view -> `[..., P]` from each player's."""
  if payoff != "zero_sum":
    return jnp.broadcast_to(values[..., None], values.shape + (num_players,))
  me = jnp.arange(num_players) == player[..., None]
  return jnp.where(me, values[..., None], -values[..., None])


def _returns(
  lanes: _Lanes, num_players: int, payoff: str, td_steps: int, discount: float
) -> chex.Array:
  """float32 `[L, B, P]`: the value target of every step, per absolute player."""
  steps = lanes.steps
  boot = _values_by_player(steps.search_value, steps.player, num_players, payoff)
  rewards = jnp.where(lanes.valid[..., None], steps.rewards, 0.0)
  # G_i = b_i + a_i G_{i+1}, a linear recurrence solved by a parallel scan.
  stops = lanes.terminated | lanes.bootstrap | (lanes.segment_end == lanes.time) | ~lanes.valid
  a = jnp.where(stops, 0.0, discount)[..., None]
  b = jnp.where(lanes.bootstrap[..., None], boot, rewards)
  mc = _backward_sums(a, b)
  if td_steps == 0:
    return mc
  # n-step: G^n_j = G_j - d^(b-j) (G_b - V_b), b = first decision >= j + n in
  # j's segment (else the Monte-Carlo/cut return already stops earlier).
  cap = lanes.time.shape[0]
  target = lanes.time + td_steps
  bidx = jnp.where(
    target < cap,
    jnp.take_along_axis(lanes.next_decision, jnp.minimum(target, cap - 1), axis=0),
    cap,
  )
  ok = bidx <= lanes.segment_end
  bc = jnp.minimum(bidx, cap - 1)[..., None]
  tail = jnp.take_along_axis(mc, bc, axis=0) - jnp.take_along_axis(boot, bc, axis=0)
  scale = jnp.where(ok, jnp.power(discount, (bidx - lanes.time)), 0.0)
  return mc - scale[..., None] * tail


def value_targets(
  buffer: BufferState, *, num_players: int, payoff: str, td_steps: int = 0, discount: float = 1.0
) -> chex.Array:
  """float32 `[L, B, P]`: the value target of every slot (physical order),
  from each absolute player's view; 0 at unwritten or invalid slots."""
  _check(num_players, payoff, td_steps, discount)
  lanes = _Lanes(buffer, 0)
  g = _returns(lanes, num_players, payoff, td_steps, discount)
  g = jnp.where(lanes.valid[..., None], g, 0.0)
  return _lane_set(jnp.zeros_like(g), lanes.slot_of, g)


def start_mask(buffer: BufferState, K: int) -> chex.Array:
  """bool `[L, B]` (physical order): the slots `sample` may start from."""
  lanes = _Lanes(buffer, K)
  return _lane_set(jnp.zeros_like(lanes.start_ok), lanes.slot_of, lanes.start_ok)


def can_sample(buffer: BufferState, K: int) -> chex.Array:
  """bool `[]`: some start is valid. `sample` on a buffer without one returns
  finite garbage, so gate the first updates on this."""
  return jnp.any(_Lanes(buffer, K).start_ok)


# ------------------------------------------------------------------- sample


@chex.dataclass(frozen=True)
class Prepared:
  """The whole-buffer facts `sample_prepared` draws from (see `prepare`).

  Attributes:
    buffer: the buffer they were derived from.
    phys: int32 `[L, B]` logical time -> slot, per lane.
    start_ok: bool `[L, B]` logical order: valid starts.
    end: int32 `[L, B]`: last step of each step's segment.
    done_at_end: bool `[L, B]`: the segment ends with the episode's end.
    decision_after: int32 `[L, B]`: the first decision step after each step
      (L: none in the lane's data).
    decision, valid: bool `[L, B]` logical order.
    values: float32 `[L, B, P]` value targets per absolute player.
  """

  buffer: BufferState
  phys: chex.Array
  start_ok: chex.Array
  end: chex.Array
  done_at_end: chex.Array
  decision_after: chex.Array
  decision: chex.Array
  valid: chex.Array
  values: chex.Array


def prepare(
  buffer: BufferState,
  *,
  K: int,
  num_players: int,
  payoff: str,
  td_steps: int = 0,
  discount: float = 1.0,
) -> Prepared:
  """Derives the targets of the whole buffer once (parallel scans, O(L B P)),
  so that many batches can be drawn from an unchanged buffer cheaply."""
  _check(num_players, payoff, td_steps, discount)
  if K < 0:
    raise ValueError(f"need K >= 0, got {K}")
  lanes = _Lanes(buffer, K)
  return Prepared(
    buffer=buffer,
    phys=lanes.slot_of,
    start_ok=lanes.start_ok,
    end=lanes.segment_end,
    done_at_end=lanes.done_at_end,
    decision_after=lanes.decision_after,
    decision=lanes.decision,
    valid=lanes.valid,
    values=_returns(lanes, num_players, payoff, td_steps, discount),
  )


def sample(
  buffer: BufferState,
  key: chex.PRNGKey,
  batch_size: int,
  *,
  K: int,
  num_players: int,
  num_actions: int,
  payoff: str,
  td_steps: int = 0,
  discount: float = 1.0,
) -> Batch:
  """Samples `batch_size` starts among the valid decision steps, stratified
  by lane (`sample_starts`), and builds their K-step targets (module
  docstring).

  Args:
    buffer: the buffer.
    key: PRNG key.
    batch_size: N.
    K: unroll steps.
    num_players, num_actions, payoff: the env's.
    td_steps: 0 for the game outcome (Monte-Carlo), n > 0 for n-step returns.
    discount: per transition (1 for board games).

  Returns:
    a `Batch` (shapes there). `sample_prepared(prepare(buffer, ...), key,
    ...)` gives the same batch.
  """
  prepared = prepare(
    buffer, K=K, num_players=num_players, payoff=payoff, td_steps=td_steps, discount=discount
  )
  return sample_prepared(
    prepared, key, batch_size, K=K, num_players=num_players, num_actions=num_actions
  )


@chex.dataclass(frozen=True)
class Starts:
  """The starts of a batch's rows, drawn by `sample_starts`.

  Attributes:
    i: int32 `[n]` logical times (0 = the lane's oldest step).
    lane: int32 `[n]` lanes, counted in the buffer that was passed in (a
      shard's own lanes when sharded).
    row: int32 `[n]` the rows' indices in the whole batch of N.
    key: the key of the unified actions fed past an episode's end, drawn
      for the whole batch (`[N, K]`) and read at `row`, so a row's actions
      do not depend on how the batch is sharded.
  """

  i: chex.Array
  lane: chex.Array
  row: chex.Array
  key: chex.PRNGKey


def sample_prepared(
  prepared: Prepared,
  key: chex.PRNGKey,
  batch_size: int,
  *,
  K: int,
  num_players: int,
  num_actions: int,
  shard: chex.Numeric = 0,
  num_shards: int = 1,
) -> Batch:
  """`sample` from the targets `prepare` derived (K must match).

  Sharded (`num_shards` > 1, inside `shard_map`): `prepared` holds shard
  `shard`'s own lanes, `[B/S, ...]` of the B, and this builds rows
  `[shard N/S, (shard+1) N/S)` of the batch from them alone: the draw is
  stratified by lane (`sample_starts`), so no shard reads another's
  replay, and the rows are those of the unsharded batch."""
  starts = sample_starts(prepared, key, batch_size, shard=shard, num_shards=num_shards)
  return targets_at(
    prepared,
    starts,
    batch_size=batch_size,
    K=K,
    num_players=num_players,
    num_actions=num_actions,
  )


def _shard_rows(batch_size: int, lanes: int, shard: chex.Numeric, num_shards: int):
  """(global row indices `[N/S]`, first global lane) of `shard`; `lanes` is
  the shard's lane count. Raises where the shards do not divide evenly."""
  if num_shards < 1 or batch_size % num_shards:
    raise ValueError(
      f"the batch of {batch_size} rows does not split over {num_shards} shards (devices): "
      f"use a batch_size that is a multiple of {num_shards}"
    )
  n = batch_size // num_shards
  shard = jnp.asarray(shard, jnp.int32)
  return shard * n + jnp.arange(n, dtype=jnp.int32), shard * lanes


def sample_starts(
  prepared: Prepared,
  key: chex.PRNGKey,
  batch_size: int,
  *,
  shard: chex.Numeric = 0,
  num_shards: int = 1,
) -> Starts:
  """The starts `sample_prepared(prepared, key, batch_size, ...)` draws
  (for shard `shard` of `num_shards`: its rows, from its lanes).

  The draw is stratified by lane: row j comes from the lanes
  `[j B // N, max((j + 1) B // N, j B // N + 1))` (B lanes, N rows), uniformly
  among their valid starts, with replacement. With N a multiple of B (every
  config) each lane gives N / B rows, uniform over its own valid starts; the
  rows, summed over a chunk, weigh every valid start as a uniform draw over
  the whole buffer does when the lanes hold as many starts each (they play
  the same number of transitions). Why stratified: rows `[d N/S, (d+1) N/S)`
  then come from lanes `[d B/S, (d+1) B/S)` for every S dividing B and N, so
  S devices each build their share of the batch from their own lanes, and
  the batch does not depend on S (the uniforms are drawn for all N rows and
  each shard reads its own). A row whose lanes hold no valid start is
  meaningless (lane `lo`, a uniform time); gate updates on
  `starts_everywhere`."""
  if batch_size < 1:
    raise ValueError(f"need batch_size >= 1, got {batch_size}")
  local_lanes = prepared.buffer.num_lanes
  rows, lane0 = _shard_rows(batch_size, local_lanes, shard, num_shards)
  u, k_act = _start_uniforms(key, batch_size)
  i, lane = _stratified_starts(
    prepared.start_ok, rows, lane0, u[rows], local_lanes * num_shards, batch_size
  )
  return Starts(i=i, lane=lane, row=rows, key=k_act)


def _start_uniforms(key: chex.PRNGKey, batch_size: int) -> Tuple[chex.Array, chex.PRNGKey]:
  """The uniforms `[N]` that pick the starts and the key of the actions past
  the end: one split of `key`."""
  k_start, k_act = jax.random.split(key)
  return jax.random.uniform(k_start, (batch_size,)), k_act


def starts_everywhere(
  start_ok: chex.Array, batch_size: int, *, shard: chex.Numeric = 0, num_shards: int = 1
) -> chex.Array:
  """bool `[]`: every row of a `batch_size` batch (of shard `shard`'s rows,
  `start_ok` `[L, B/S]` its lanes) has a valid start to draw
  (`sample_starts`): with `batch_size` >= the lane count, every lane has
  one."""
  local_lanes = start_ok.shape[1]
  rows, lane0 = _shard_rows(batch_size, local_lanes, shard, num_shards)
  lo, hi = _row_lanes(rows, local_lanes * num_shards, batch_size)
  has = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(jnp.any(start_ok, axis=0))])
  return jnp.all(has[hi - lane0] > has[lo - lane0])


def _row_lanes(rows: chex.Array, lanes: int, batch_size: int) -> Tuple[chex.Array, chex.Array]:
  """The lanes `[lo, hi)` row `rows` draws from (`sample_starts`)."""
  lo = rows * lanes // batch_size
  return lo, jnp.maximum((rows + 1) * lanes // batch_size, lo + 1)


def _stratified_starts(
  start_ok: chex.Array,
  rows: chex.Array,
  lane0: chex.Array,
  u: chex.Array,
  lanes: int,
  batch_size: int,
) -> Tuple[chex.Array, chex.Array]:
  """`sample_starts`' rule for rows `rows` `[n]` (global row indices) with
  uniforms `u` `[n]`, on `start_ok` `[L, b]` of lanes `lane0 ..
  lane0 + b - 1` (all of the rows' lanes among them). Returns (logical time,
  lane - lane0), int32 `[n]` each. Integer arithmetic on counts, so any block
  of lanes gives the same draws as the whole buffer."""
  cap = start_ok.shape[0]
  lo, hi = _row_lanes(rows, lanes, batch_size)
  lo, hi = lo - lane0, hi - lane0
  cum = jnp.cumsum(start_ok.astype(jnp.int32), axis=0)  # [L, b] valid starts up to t
  before = jnp.concatenate([jnp.zeros((1,), jnp.int32), jnp.cumsum(cum[-1])])  # [b + 1]
  base, width = before[lo], before[hi] - before[lo]
  p = base + jnp.minimum((u * width).astype(jnp.int32), jnp.maximum(width - 1, 0))
  lane = jnp.searchsorted(before[1:], p, side="right").astype(jnp.int32)
  rank = p - before[lane]  # the start's rank in its lane
  # i = the first time whose running count exceeds the rank: a binary search
  # (log2 L gathers of one count per row, not a [L, n] column per row).
  i, hi = jnp.zeros_like(rank), jnp.full_like(rank, cap)
  for _ in range(cap.bit_length()):
    mid = (i + hi) // 2
    right = cum[jnp.minimum(mid, cap - 1), lane] <= rank
    i, hi = jnp.where(right, mid + 1, i), jnp.where(right, hi, mid)
  empty = width == 0
  lane = jnp.where(empty, lo, lane)
  i = jnp.where(empty, jnp.minimum((u * cap).astype(jnp.int32), cap - 1), i)
  return i, lane


def _past_end_actions(starts: Starts, batch_size: int, K: int, num_unified: int) -> chex.Array:
  """int32 `[n, K]`: the random unified actions fed to g past the end, for
  the rows of `starts` (drawn for the whole batch, read at the rows)."""
  return jax.random.randint(starts.key, (batch_size, K), 0, num_unified)[starts.row]


def targets_at(
  prepared: Prepared,
  starts: Starts,
  *,
  batch_size: int,
  K: int,
  num_players: int,
  num_actions: int,
) -> Batch:
  """The `Batch` of `starts` (rows of a batch of `batch_size`). Meaningful
  where `prepared.start_ok[starts.i, starts.lane]`."""
  if K < 0:
    raise ValueError(f"need K >= 0, got {K}")
  num_chance = prepared.buffer.data.chance_probs.shape[-1]
  random_actions = _past_end_actions(starts, batch_size, K, num_actions + num_chance)
  return _targets(prepared, starts.i, starts.lane, random_actions, K=K, num_players=num_players)


def _targets(
  prepared: Prepared,
  i: chex.Array,
  lane: chex.Array,
  random_actions: chex.Array,
  *,
  K: int,
  num_players: int,
) -> Batch:
  """`targets_at` with the actions past the end given, int32 `[N, K]`."""
  buffer = prepared.buffer
  cap = buffer.capacity
  batch_size = i.shape[0]
  num_actions = prepared.buffer.data.search_policy.shape[-1]
  num_chance = buffer.data.chance_probs.shape[-1]
  phys = prepared.phys
  values = prepared.values

  pos = i[:, None] + jnp.arange(K + 1)  # [N, K+1]
  alive = pos <= prepared.end[i, lane][:, None]
  pos = jnp.minimum(pos, cap - 1)
  lane_k = lane[:, None]
  slot = phys[pos, lane_k]
  start = phys[i, lane]  # [N] slot
  data = buffer.data
  root = data.player[start, lane]  # [N], >= 0
  root_k = root[:, None]

  actions = jnp.where(alive[:, :K], data.action[slot[:, :K], lane_k], random_actions).astype(
    jnp.int32
  )
  rewards = jnp.take_along_axis(data.rewards[slot[:, :K], lane_k], root_k[..., None], axis=-1)[
    ..., 0
  ]
  identity = relative_identity(data.next_player[slot[:, :K], lane_k], root_k, num_players)
  value = jnp.take_along_axis(values[pos, lane_k], root_k[..., None], axis=-1)[..., 0]
  policy_mask = alive & prepared.decision[pos, lane_k]
  chance_mask = alive & prepared.valid[pos, lane_k] & (data.player[slot, lane_k] == CHANCE)
  policy = data.search_policy[slot, lane_k]
  chance = data.chance_probs[slot, lane_k]
  successor_obs = data.observation[slot[:, 1:], lane_k]  # [N, K, *obs]
  obs_mask = policy_mask[:, 1:].reshape((batch_size, K) + (1,) * (successor_obs.ndim - 2))
  batch = Batch(
    observation=data.observation[start, lane],
    actions=actions,
    target_value=jnp.where(alive, value, 0.0),
    target_reward=jnp.where(alive[:, :K], rewards, 0.0),
    target_policy=jnp.where(policy_mask[..., None], policy, 0.0),
    policy_mask=policy_mask,
    target_chance=jnp.where(chance_mask[..., None], chance, 0.0),
    chance_mask=chance_mask,
    target_identity=jnp.where(alive[:, :K], identity, terminal_identity(num_players)).astype(
      jnp.int32
    ),
    successor_observation=jnp.where(obs_mask, successor_obs, 0.0),
  )
  n = batch_size
  chex.assert_shape(batch.observation, (n,) + data.observation.shape[2:])
  chex.assert_shape([batch.actions, batch.target_reward, batch.target_identity], (n, K))
  chex.assert_shape([batch.target_value, batch.policy_mask, batch.chance_mask], (n, K + 1))
  chex.assert_shape(batch.target_policy, (n, K + 1, num_actions))
  chex.assert_shape(batch.target_chance, (n, K + 1, num_chance))
  chex.assert_shape(batch.successor_observation, (n, K) + data.observation.shape[2:])
  return batch


# ------------------------------------------- decision-to-decision unrolls


@chex.dataclass(frozen=True)
class DecisionBatch:
  """N training samples of a K-step unroll over *decision* steps (Stochastic
  MuZero, `anakin_mz.stochastic_muzero`): step k goes from the k-th decision
  d_k of the sample to the next one, d_{k+1}, through every chance node in
  between. Past the episode's end: value, reward and turn 0, policy masked,
  a uniformly random player action and an all-zero next observation.

  Attributes:
    observation: `[N, *obs]` at d_0, the sampled start.
    actions: int32 `[N, K]` the player action taken at d_k.
    next_observation: `[N, K, *obs]` the observation at d_{k+1} (the input
      of the chance-code encoder); all zeros where the episode ended first.
    target_value: `[N, K+1]` value target at d_k, from d_k's mover's view.
    target_reward: `[N, K]` rewards from d_k up to d_{k+1} (or the end),
      discounted per transition, from d_k's mover's view.
    target_policy: `[N, K+1, A]` search visits at d_k; policy_mask `[N, K+1]`
      bool (d_k is before the episode's end).
    target_turn: int32 `[N, K]` 1 where the mover at d_{k+1} is not d_k's
      mover, else 0 (the episode ended first: 0).
  """

  observation: chex.Array
  actions: chex.Array
  next_observation: chex.Array
  target_value: chex.Array
  target_reward: chex.Array
  target_policy: chex.Array
  policy_mask: chex.Array
  target_turn: chex.Array


@chex.dataclass(frozen=True)
class DecisionPrepared:
  """The whole-buffer facts `sample_decisions` draws from (`prepare_decisions`).

  Attributes:
    base: the transition-level `Prepared` (values, segments, slots).
    next_decision: int32 `[L, B]` logical order: the first decision step
      after each step (L: none in the lane's data).
    reward_to_next: float32 `[L, B, P]`: rewards from each step up to the
      next decision step or the end of its segment, discounted per
      transition, per absolute player.
    start_ok: bool `[L, B]`: decision steps whose K next decisions are known
      (or whose episode ends first).
  """

  base: Prepared
  next_decision: chex.Array
  reward_to_next: chex.Array
  start_ok: chex.Array


def prepare_decisions(prepared: Prepared, *, K: int, discount: float = 1.0) -> DecisionPrepared:
  """The decision-to-decision facts of the buffer `prepared` was derived from
  (O(K L B) gathers and one parallel scan), on top of `prepared`'s own
  segment ends and next decisions."""
  buffer = prepared.buffer
  cap = buffer.capacity
  time = jnp.broadcast_to(jnp.arange(cap)[:, None], prepared.valid.shape)
  never = jnp.int32(cap)
  next_decision = prepared.decision_after
  # A chain of decisions stays in its segment: a later one belongs to the
  # next episode (or is unknown).
  chain = time
  for _ in range(K):
    chain = jnp.where(
      chain < cap, jnp.take_along_axis(next_decision, jnp.minimum(chain, cap - 1), axis=0), never
    )
  start_ok = prepared.decision & (prepared.done_at_end | (chain <= prepared.end))
  # Rewards up to the next decision: the recurrence stops before a decision
  # step and at the segment's end.
  valid_next = jnp.concatenate([prepared.valid[1:], jnp.zeros_like(prepared.valid[:1])])
  decision_next = jnp.concatenate([prepared.decision[1:], jnp.zeros_like(prepared.decision[:1])])
  goes_on = prepared.valid & valid_next & ~decision_next & (prepared.end > time)
  rewards = jnp.where(prepared.valid[..., None], _lane_get(buffer.data.rewards, prepared.phys), 0.0)
  reward_to_next = _backward_sums(jnp.where(goes_on, discount, 0.0)[..., None], rewards)
  return DecisionPrepared(
    base=prepared, next_decision=next_decision, reward_to_next=reward_to_next, start_ok=start_ok
  )


def sample_decisions(
  dprepared: DecisionPrepared,
  key: chex.PRNGKey,
  batch_size: int,
  *,
  K: int,
  num_actions: int,
  shard: chex.Numeric = 0,
  num_shards: int = 1,
) -> DecisionBatch:
  """`batch_size` starts drawn (stratified by lane, `sample_starts`; sharded
  as `sample_prepared`) among `dprepared.start_ok`, and their K-step
  decision unrolls (`DecisionBatch`)."""
  prepared = dprepared.base.replace(start_ok=dprepared.start_ok)
  starts = sample_starts(prepared, key, batch_size, shard=shard, num_shards=num_shards)
  return decisions_at(dprepared, starts, batch_size=batch_size, K=K, num_actions=num_actions)


def decisions_at(
  dprepared: DecisionPrepared,
  starts: Starts,
  *,
  batch_size: int,
  K: int,
  num_actions: int,
) -> DecisionBatch:
  """The `DecisionBatch` of `starts` (rows of a batch of `batch_size`).
  Meaningful where `dprepared.start_ok[starts.i, starts.lane]`."""
  if K < 0:
    raise ValueError(f"need K >= 0, got {K}")
  i, lane = starts.i, starts.lane
  prepared = dprepared.base
  data = prepared.buffer.data
  cap = prepared.buffer.capacity
  n = i.shape[0]
  end = prepared.end[i, lane]  # [N]
  times, alive = [i], [jnp.ones((n,), jnp.bool_)]
  for _ in range(K):
    nxt = dprepared.next_decision[jnp.minimum(times[-1], cap - 1), lane]
    alive.append(alive[-1] & (nxt <= end))
    times.append(nxt)
  pos = jnp.minimum(jnp.stack(times, axis=1), cap - 1)  # [N, K+1] logical times
  alive = jnp.stack(alive, axis=1)
  lane_k = lane[:, None]
  slot = prepared.phys[pos, lane_k]
  player = jnp.maximum(data.player[slot, lane_k], 0)  # a decision's mover where alive
  mine = lambda x: jnp.take_along_axis(x, player[..., None], axis=-1)[..., 0]
  value = mine(prepared.values[pos, lane_k])
  reward = mine(dprepared.reward_to_next[pos, lane_k])[:, :K]
  random_actions = _past_end_actions(starts, batch_size, K, num_actions)
  actions = jnp.where(alive[:, :K], data.action[slot[:, :K], lane_k], random_actions)
  next_alive = alive[:, 1:]
  obs = data.observation[slot[:, 1:], lane_k]
  next_obs = jnp.where(next_alive.reshape(next_alive.shape + (1,) * (obs.ndim - 2)), obs, 0.0)
  turn = next_alive & (player[:, 1:] != player[:, :K])
  batch = DecisionBatch(
    observation=data.observation[slot[:, 0], lane],
    actions=actions.astype(jnp.int32),
    next_observation=next_obs,
    target_value=jnp.where(alive, value, 0.0),
    target_reward=jnp.where(alive[:, :K], reward, 0.0),
    target_policy=jnp.where(alive[..., None], data.search_policy[slot, lane_k], 0.0),
    policy_mask=alive,
    target_turn=turn.astype(jnp.int32),
  )
  chex.assert_shape([batch.actions, batch.target_reward, batch.target_turn], (n, K))
  chex.assert_shape([batch.target_value, batch.policy_mask], (n, K + 1))
  chex.assert_shape(batch.next_observation, (n, K) + data.observation.shape[2:])
  return batch
