"""Carchess's state (`CarchessState`): what `envs.carchess.Carchess` and its
mixins (`carchess_bits.LaneBits`, `carchess_view.CarchessViews`) read and
write."""

from __future__ import annotations

import jax
from flax import struct


@struct.dataclass
class CarchessState:
  """The board and the round bookkeeping. All fields have fixed shapes.

  Attributes:
    cars: bool `[lanes, max_lane_length]`, a car of lane l at position i of
      its lane (index into the lane's cells; never its last cell).
    red: bool `[num_lights]`, the light is red.
    toggled: bool `[num_lights]`, toggled in the current round.
    counters: int32 `[lanes]`, spawn counters.
    round: int32 `[]`, completed rounds (== rounds once the game is over).
    turn: int32 `[]`, the player to move in this round.
    chance_lane: int32 `[]`, the lane of the next spawn-counter chance node;
      == lanes when no chance node is pending.
    spawned, scored, crashed, crashes: int32 `[]` totals so far: cars spawned,
      cars that reached the end, cars removed by crashes, and the crash count
      (sum of k - 1 over crash cells).
  """

  cars: jax.Array
  red: jax.Array
  toggled: jax.Array
  counters: jax.Array
  round: jax.Array
  turn: jax.Array
  chance_lane: jax.Array
  spawned: jax.Array
  scored: jax.Array
  crashed: jax.Array
  crashes: jax.Array
