"""Drawing a batch of K-step unrolls from the prepared buffer
(`anakin_mz.core.replay`): starts stratified by lane, sharded, and their
targets."""

from __future__ import annotations

from typing import Optional, Tuple

import chex
import jax
import jax.numpy as jnp

from envs.core import CHANCE
from anakin_mz.core.replay.buffer import BufferState
from anakin_mz.core.replay.targets import Prepared, prepare
from anakin_mz.core.types import relative_identity, terminal_identity


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
    sibling_action: int32 `[N, K+1, S]`, the legal moves at step t+k in
      `S` slots (-1: none, and every slot of a step k >= 1 where
      `policy_mask` is False), and sibling_q `[N, K+1, S]` their real
      one-ply values from the view of the mover at step t+k
      (`Transition.sibling_q`; at k = 0 the start mover's; 0 where the
      action is -1); or None, where the buffer keeps none. A batch built by
      hand may hold the start step's alone, `[N, S]`. Read by the
      sibling-value term (`loss.sibling_value_loss`: its "start" steps read
      k = 0, its "all" steps every k, turned to the start mover's view with
      `target_identity`).
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
  sibling_action: Optional[chex.Array] = None
  sibling_q: Optional[chex.Array] = None


def check_batch(
  batch: Batch,
  *,
  observation_shape: Optional[Tuple[int, ...]] = None,
  num_actions: Optional[int] = None,
  num_chance: Optional[int] = None,
) -> None:
  """Asserts (chex, at trace time) that `batch`'s fields agree in shape:
  N and K from `actions` `[N, K]`, then every field as `Batch` gives it.
  `observation_shape`, `num_actions` (A) and `num_chance` (C) are checked
  too where given; None leaves that size to the batch. Where the replay
  hands a batch to a learner, a wrong field fails here, named, not as a
  broadcast deep in the loss."""
  chex.assert_rank(batch.actions, 2, custom_message="Batch.actions must be [N, K]")
  n, k = batch.actions.shape
  obs = (n,) + (tuple(observation_shape) if observation_shape is not None else (...,))
  for name, shape in (
    ("observation", obs),
    ("target_reward", (n, k)),
    ("target_identity", (n, k)),
    ("target_value", (n, k + 1)),
    ("policy_mask", (n, k + 1)),
    ("chance_mask", (n, k + 1)),
    ("target_policy", (n, k + 1, num_actions)),
    ("target_chance", (n, k + 1, num_chance)),
  ):
    chex.assert_shape(getattr(batch, name), shape, custom_message=f"Batch.{name}")
  if batch.successor_observation is not None:
    chex.assert_shape(
      batch.successor_observation,
      (n, k) + batch.observation.shape[1:],
      custom_message="Batch.successor_observation vs [N, K] + observation's",
    )
  if (batch.sibling_action is None) != (batch.sibling_q is None):
    raise ValueError("Batch.sibling_action and Batch.sibling_q come together (both or neither)")
  if batch.sibling_q is not None:
    if batch.sibling_q.ndim == 2:
      chex.assert_shape(batch.sibling_q, (n, None), custom_message="Batch.sibling_q [N, S]")
    else:
      chex.assert_shape(
        batch.sibling_q, (n, k + 1, None), custom_message="Batch.sibling_q [N, K+1, S] or [N, S]"
      )
    chex.assert_equal_shape(
      [batch.sibling_action, batch.sibling_q], custom_message="Batch.sibling_action vs sibling_q"
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
  value_lambda: float = 1.0,
  bootstrap: str = "search",
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
    value_lambda, bootstrap: the value targets' lambda-return and bootstrap
      value (`prepare`).

  Returns:
    a `Batch` (shapes there). `sample_prepared(prepare(buffer, ...), key,
    ...)` gives the same batch.
  """
  prepared = prepare(
    buffer,
    K=K,
    num_players=num_players,
    payoff=payoff,
    td_steps=td_steps,
    discount=discount,
    value_lambda=value_lambda,
    bootstrap=bootstrap,
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
  # Unrolled: the same lanes, without a loop of ~7 kernels per bisection step.
  lane = jnp.searchsorted(before[1:], p, side="right", method="scan_unrolled")
  lane = lane.astype(jnp.int32)
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


def past_end_actions(starts: Starts, batch_size: int, K: int, num_unified: int) -> chex.Array:
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
  random_actions = past_end_actions(starts, batch_size, K, num_actions + num_chance)
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
  if data.sibling_q is not None:
    # Every step's, [N, K+1, S]: k = 0 the start's as stored (the fields the
    # batch held before it held every step's), k >= 1 cleared where t+k is
    # no decision step of the episode.
    on = (policy_mask | (jnp.arange(K + 1) == 0))[..., None]
    batch = batch.replace(
      sibling_action=jnp.where(on, data.sibling_action[slot, lane_k], -1).astype(jnp.int32),
      sibling_q=jnp.where(on, data.sibling_q[slot, lane_k], 0.0),
    )
  check_batch(
    batch,
    observation_shape=data.observation.shape[2:],
    num_actions=num_actions,
    num_chance=num_chance,
  )
  chex.assert_shape(batch.actions, (batch_size, K))
  return batch
