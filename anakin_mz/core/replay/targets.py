"""The targets of the whole buffer, derived once per chunk
(`anakin_mz.core.replay`): returns, segments and valid starts (`prepare`)."""

from __future__ import annotations

import types


import chex
import jax
import jax.numpy as jnp

from envs.core import PAYOFF_KINDS
from anakin_mz.core.replay.buffer import BufferState, lane_get, lane_set


# What stands in for the rest of a game where a value target bootstraps
# (`train.value_bootstrap`): the root's search value, or the best sibling's.
BOOTSTRAPS = ("search", "siblings")


def _check(
  num_players: int,
  payoff: str,
  td_steps: int,
  discount: float,
  value_lambda: float = 1.0,
  bootstrap: str = "search",
):
  if not 0.0 <= value_lambda <= 1.0:
    raise ValueError(f"value_lambda must be in [0, 1] (1: no lambda-return), got {value_lambda}")
  if value_lambda < 1.0 and td_steps > 0:
    raise ValueError(
      f"value_lambda={value_lambda} with td_steps={td_steps}: the lambda-return "
      "already weighs every horizon; use td_steps 0 with it"
    )
  if bootstrap not in BOOTSTRAPS:
    raise ValueError(f"bootstrap must be one of {', '.join(BOOTSTRAPS)}, got {bootstrap!r}")
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

  def __init__(self, buffer: BufferState, k: int, bootstrap: str = "search"):
    cap = buffer.capacity
    oldest = (buffer.write - buffer.count) % cap  # [B]
    self.slot_of = (oldest + jnp.arange(cap)[:, None]) % cap
    steps = types.SimpleNamespace(
      **{f: lane_get(getattr(buffer.data, f), self.slot_of) for f in _STEP_FIELDS}
    )
    if bootstrap == "siblings":
      steps.search_value = _best_sibling(buffer, self.slot_of, steps.search_value)
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


def _best_sibling(buffer: BufferState, slot_of: chex.Array, search_value: chex.Array) -> chex.Array:
  """float32 `[L, B]` (logical order): at each step with recorded siblings
  the best sibling's real one-ply value (`Transition.sibling_q`, the
  mover's view: the value head's greedy expectimax one move deep), else the
  step's search value (a lane `loss.sibling_lane_stride` skipped)."""
  if buffer.data.sibling_q is None:
    raise ValueError(
      "bootstrap='siblings' needs the buffer's sibling values (a buffer built with "
      "example_transition(env, siblings=True): loss.sibling_value_weight > 0); this one has none"
    )
  action = lane_get(buffer.data.sibling_action, slot_of)  # [L, B, S]
  q = lane_get(buffer.data.sibling_q, slot_of)
  recorded = action >= 0
  best = jnp.max(jnp.where(recorded, q, -jnp.inf), axis=-1)
  return jnp.where(jnp.any(recorded, axis=-1), best, search_value)


def backward_sums(a: chex.Array, b: chex.Array) -> chex.Array:
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
  lanes: _Lanes,
  num_players: int,
  payoff: str,
  td_steps: int,
  discount: float,
  value_lambda: float = 1.0,
) -> chex.Array:
  """float32 `[L, B, P]`: the value target of every step, per absolute player."""
  steps = lanes.steps
  boot = _values_by_player(steps.search_value, steps.player, num_players, payoff)
  rewards = jnp.where(lanes.valid[..., None], steps.rewards, 0.0)
  # G_i = b_i + a_i G_{i+1}, a linear recurrence solved by a parallel scan.
  stops = lanes.terminated | lanes.bootstrap | (lanes.segment_end == lanes.time) | ~lanes.valid
  a = jnp.where(stops, 0.0, discount)[..., None]
  b = jnp.where(lanes.bootstrap[..., None], boot, rewards)
  if value_lambda < 1.0:
    # The lambda-return: G_i = r_i + d ((1 - l) V_{i+1} + l G_{i+1}) where
    # step i+1 is a decision step (V its bootstrap value), G_i = r_i + d
    # G_{i+1} where it is a chance step (no value there). The same scan.
    next_boot = jnp.concatenate([boot[1:], jnp.zeros_like(boot[:1])], axis=0)
    next_decision = jnp.concatenate([lanes.decision[1:], jnp.zeros_like(lanes.decision[:1])])
    mix = jnp.where(stops | ~next_decision, 0.0, 1.0 - value_lambda)[..., None]
    b = b + discount * mix * next_boot
    a = a * (1.0 - mix)
  mc = backward_sums(a, b)
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
  buffer: BufferState,
  *,
  num_players: int,
  payoff: str,
  td_steps: int = 0,
  discount: float = 1.0,
  value_lambda: float = 1.0,
  bootstrap: str = "search",
) -> chex.Array:
  """float32 `[L, B, P]`: the value target of every slot (physical order),
  from each absolute player's view; 0 at unwritten or invalid slots.
  `value_lambda` and `bootstrap` as `prepare`'s."""
  _check(num_players, payoff, td_steps, discount, value_lambda, bootstrap)
  lanes = _Lanes(buffer, 0, bootstrap)
  g = _returns(lanes, num_players, payoff, td_steps, discount, value_lambda)
  g = jnp.where(lanes.valid[..., None], g, 0.0)
  return lane_set(jnp.zeros_like(g), lanes.slot_of, g)


def start_mask(buffer: BufferState, K: int) -> chex.Array:
  """bool `[L, B]` (physical order): the slots `sample` may start from."""
  lanes = _Lanes(buffer, K)
  return lane_set(jnp.zeros_like(lanes.start_ok), lanes.slot_of, lanes.start_ok)


def can_sample(buffer: BufferState, K: int) -> chex.Array:
  """bool `[]`: some start is valid. `sample` on a buffer without one returns
  finite garbage, so gate the first updates on this."""
  return jnp.any(_Lanes(buffer, K).start_ok)


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
  value_lambda: float = 1.0,
  bootstrap: str = "search",
) -> Prepared:
  """Derives the targets of the whole buffer once (parallel scans, O(L B P)),
  so that many batches can be drawn from an unchanged buffer cheaply.

  `value_lambda` < 1 (with `td_steps` 0) makes each value target the
  lambda-return over the decision steps ahead (TD(lambda)'s target, Sutton &
  Barto 12.1): the bootstrap value of the next decision step weighted 1 -
  lambda, the return after it lambda; chance steps pass the return through.
  `bootstrap` is the value that stands in for the rest of the game wherever
  a target bootstraps (n-step, lambda, a cut segment): "search", the root's
  search value, or "siblings", the best recorded sibling's real one-ply
  value (`Transition.sibling_q`: the value head's greedy one-move expectimax
  on the real game, whatever move self-play drew), the search value where a
  step has none."""
  _check(num_players, payoff, td_steps, discount, value_lambda, bootstrap)
  if K < 0:
    raise ValueError(f"need K >= 0, got {K}")
  lanes = _Lanes(buffer, K, bootstrap)
  return Prepared(
    buffer=buffer,
    phys=lanes.slot_of,
    start_ok=lanes.start_ok,
    end=lanes.segment_end,
    done_at_end=lanes.done_at_end,
    decision_after=lanes.decision_after,
    decision=lanes.decision,
    valid=lanes.valid,
    values=_returns(lanes, num_players, payoff, td_steps, discount, value_lambda),
  )
