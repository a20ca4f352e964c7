"""Carchess's simulation on lane bit masks (`LaneBits`), the fast path of
`envs.carchess.Carchess.simulate`: each lane's cars as the bits of one
uint32 word, moved, spawned and crashed with shifts and masks."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.carchess_state import CarchessState


class LaneBits:
  """The lane-bit-mask simulation of `Carchess` (a mixin: it reads the
  static tables `Carchess._build_tables` makes, `_light_bits`, `_cross*`,
  `_last_pos`, `_stand_bits`, `_entry_*` and `_shared_*`)."""

  def _to_bits(self, cars: jax.Array) -> jax.Array:
    """uint32 `[lanes]` from bool `[lanes, max_lane_length]`."""
    shift = np.arange(cars.shape[1], dtype=np.uint32)  # shifts: see `Carchess._light_word`
    return jnp.sum(jnp.left_shift(cars.astype(jnp.uint32), shift), axis=1, dtype=jnp.uint32)

  def _from_bits(self, bits: jax.Array) -> jax.Array:
    shift = jnp.arange(self.map.max_lane_length, dtype=jnp.uint32)
    return (jnp.right_shift(bits[:, None], shift) & 1).astype(jnp.bool_)

  def _red_bits(self, red: jax.Array) -> jax.Array:
    """uint32 `[lanes]`: the positions on a red light (lights own distinct
    cells, so the sum is an or)."""
    bits = red[:, None].astype(jnp.uint32) * jnp.asarray(self._light_bits)
    return jnp.sum(bits, axis=0, dtype=jnp.uint32)

  def _node_bits(self, bits: jax.Array, lanes: np.ndarray, pos: np.ndarray) -> jax.Array:
    """uint32 `lanes.shape`: the car bit of each listed node (0 for padding)."""
    # Static slices, not a gather: XLA fuses them into the consumers.
    words = [
      bits[l] if l < bits.shape[0] else jnp.zeros((), bits.dtype)
      for l in lanes.reshape(-1).tolist()
    ]
    words = jnp.stack(words).reshape(lanes.shape)
    return jnp.right_shift(words, jnp.asarray(pos)) & 1

  def _movable_bits(self, cars: jax.Array, red: jax.Array) -> jax.Array:
    one = jnp.uint32(1)
    if self._cross is None:
      # Blockers are only the next car of the same lane: a car is stuck iff
      # some car of its unbroken queue ahead stands on a red light. Carry
      # "stuck" back along the queues by doubling (a parallel prefix).
      stuck, queue = cars & red, cars
      k = 1
      while k < self.map.max_lane_length:
        stuck = stuck | (queue & jnp.right_shift(stuck, jnp.uint32(k)))
        queue = queue & jnp.right_shift(queue, jnp.uint32(k))
        k *= 2
      return cars & ~stuck
    # Lanes that merge: follow the links one at a time, each iteration
    # carrying "stuck" one link back.
    free = ~red
    move = free
    target = jnp.asarray(self._cross_target)  # [targets, lanes]
    for _ in range(self._iterations):
      stuck = cars & ~move
      hit = jnp.max(self._node_bits(stuck, self._cross_lane, self._cross_pos), axis=1)
      cross = jnp.sum(jnp.where(hit[:, None] > 0, target, jnp.uint32(0)), axis=0, dtype=jnp.uint32)
      move = free & ~(jnp.right_shift(stuck, one) | cross)
    return cars & move

  def _step_bits(self, cars: jax.Array, red: jax.Array, counters: jax.Array):
    """One simulation step on lane bit masks `cars` uint32 `[lanes]`.
    Returns (cars', counters', and int32 counts: cars scored and spawned per
    lane `[lanes]`, crash count and cars removed per shared cell `[cells]`).
    The counts are summed once, after the last step (`_simulate_bits`): a
    sum is a `reduce`, which ends an XLA fusion."""
    one = jnp.uint32(1)
    moved = self._movable_bits(cars, red)
    scored = (jnp.right_shift(moved, jnp.asarray(self._last_pos)) & one).astype(jnp.int32)
    cars = ((cars & ~moved) | jnp.left_shift(moved, one)) & jnp.asarray(self._stand_bits)
    busy = jnp.max(self._node_bits(cars, self._entry_lane, self._entry_pos), axis=1)
    spawn = (busy == 0) & (counters > 0)
    cars = cars | spawn.astype(jnp.uint32)
    spawn = spawn.astype(jnp.int32)
    if self._shared_lane.shape[0]:
      count = jnp.sum(
        self._node_bits(cars, self._shared_lane, self._shared_pos), axis=1, dtype=jnp.int32
      )
      crash_cell = count >= 2
      crashes = jnp.where(crash_cell, count - 1, 0)
      removed = jnp.where(crash_cell, count, 0)
      # The bits of the crash cells' nodes, per lane (disjoint: a sum).
      rm = crash_cell[:, None].astype(jnp.uint32) * jnp.asarray(self._shared_rows)
      cars = cars & ~jnp.sum(rm, axis=0, dtype=jnp.uint32)
    else:
      crashes = removed = jnp.zeros((1,), jnp.int32)
    return cars, counters - spawn, scored, spawn, crashes, removed

  def _simulate_bits(self, g: CarchessState, steps: int):
    """`steps` steps on lane bit masks. Returns (g', cars scored, crash
    count), int32 `[]`."""
    cars, red, counters = self._to_bits(g.cars), self._red_bits(g.red), g.counters
    totals = None
    for _ in range(steps):  # unrolled: a handful of steps, no loop
      cars, counters, *counts = self._step_bits(cars, red, counters)
      totals = counts if totals is None else [a + b for a, b in zip(totals, counts)]
    scored, spawned, crashes, removed = (jnp.sum(x, dtype=jnp.int32) for x in totals)
    g = g.replace(
      cars=self._from_bits(cars),
      counters=counters,
      spawned=g.spawned + spawned,
      scored=g.scored + scored,
      crashed=g.crashed + removed,
      crashes=g.crashes + crashes,
    )
    return g, scored, crashes
