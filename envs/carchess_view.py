"""Carchess's observation (`CarchessViews`, a mixin of
`envs.carchess.Carchess`): a small int32 code per cell, one bit per channel,
then one elementwise expansion into the float planes. Its channels, against
the thesis's, are listed in `CarchessViews.observe`."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from envs.carchess_state import CarchessState

# Channel bits per int32 code word. Bit _BITS of the light channel's word is
# the red light, bit 31 is never set.
_BITS = 29


class CarchessViews:
  """The observation of `Carchess` (a mixin: it reads the static tables
  `Carchess._build_tables` makes and the map)."""

  def _build_view_tables(self) -> None:
    """Static tables of the observation. It is built in two passes (see
    `observe`): a small int32 code per cell, one bit per channel (two for
    the light plane: green, and red at bit `_BITS`), then one elementwise
    expansion into the float planes."""
    L, hw, C = self.num_lanes, self._hw, self.observation_shape[-1]
    K = -(-C // _BITS)  # words per cell
    # Where each lane position lies: [lane, cell], for the lane planes.
    pos = np.full((L, hw), 31, np.uint32)  # 31: not on the lane (a bit never set)
    for l in range(L):
      for i in range(self._lengths[l] - 1):
        pos[l, self._cell[l, i]] = i
    # Lanes entering at one cell: the k-th of them writes its counter bit in
    # code layer k, so the planes can count two lanes with equal counters.
    rank = np.zeros(L, np.int32)
    for l in range(L):
      rank[l] = int(np.sum(self._cell[:l, 0] == self._cell[l, 0]))
    layers = int(rank.max()) + 1
    entry = np.zeros((layers, L, hw), np.int32)  # [layer, lane, cell]
    for l in range(L):
      entry[rank[l], l, self._cell[l, 0]] = 1
    has_light = np.zeros(hw, bool)
    has_light[self._light_cells] = True
    light = np.full(hw, 32, np.uint32)  # the light on each cell; 32: none (a bit never set)
    light[self._light_cells] = np.arange(len(self._light_cells))
    # Channel c is `bit(word, plus) - bit(word, minus)`: its own bit minus
    # bit 31 (never set), except the light plane, green minus red (bit
    # _BITS). Measured on CPU, the cheapest expansion that gives -1/0/+1:
    # tables of masks or offsets cost up to a third more.
    plus = np.arange(C, dtype=np.int32) % _BITS
    minus = np.full(C, 31, np.int32)
    minus[L] = _BITS
    self._view_words = K
    self._view_pos = pos
    self._view_light = light
    self._view_light2 = np.where(light < 32, 2 * light, 32).astype(np.uint32)
    self._view_has_light = has_light.astype(np.int32)
    self._view_entry = entry
    self._view_plus = plus
    self._view_minus = minus

  def _channel_bits(self, channel: jax.Array) -> jax.Array:
    """int32 `channel.shape + [words]`: the code words with `channel`'s bit."""
    if self._view_words == 1:
      return jnp.left_shift(1, channel)[..., None].astype(jnp.int32)
    word = jnp.arange(self._view_words) == (channel // _BITS)[..., None]
    return jnp.where(word, jnp.left_shift(1, channel % _BITS)[..., None], 0).astype(jnp.int32)

  def observation_code(self, g: CarchessState, player: jax.Array) -> jax.Array:
    """int32 `[layers, words, height * width]`: the observation as bits, bit
    `c % 29` of word `c // 29` for channel c; the light plane (channel L =
    lanes) has a bit for green and bit 29 of its word for red; the toggled
    plane (channel `_toggled_channel`) one bit. The layers > 0 only hold the
    counter bits of lanes sharing an entry cell.

    One sum over per-lane terms, so XLA computes the code once per cell in
    a reduction, not once per channel inside the loop that writes the float
    planes."""
    L, T = self.num_lanes, self._toggled_channel
    n, rounds = self.num_players, self.params["rounds"]
    # Lane planes: which lanes have a car on each cell.
    if self._bits:
      # Off-lane cells read bit 31, never set: cars never stand on a lane's
      # last cell, so no lane (<= 32 cells) uses it.
      occ = jnp.right_shift(self._to_bits(g.cars)[:, None], self._view_pos) & 1
      occ = occ.astype(jnp.int32)  # [lanes, cells]
    else:
      grid = jnp.asarray(self._node_grid)  # dense fallback: [lanes, positions, cells]
      occ = jnp.any(g.cars[:, :, None] & grid, axis=1).astype(jnp.int32)
    if self.num_lights <= 16:
      # Light k's red (bit 2k) and toggled (bit 2k + 1) in one word, read
      # at each light's cell.
      shift = np.arange(0, 2 * self.num_lights, 2, dtype=np.uint32)
      both = jnp.left_shift(g.red.astype(jnp.uint32), shift) + jnp.left_shift(
        g.toggled.astype(jnp.uint32), shift + 1
      )
      both = jnp.right_shift(jnp.sum(both, dtype=jnp.uint32), self._view_light2) & 3
      both = both.astype(jnp.int32)
      red, tog = both & 1, jnp.right_shift(both, 1)
    elif self.num_lights <= 32:
      # The red and the toggled lights as one word each, read at each
      # light's cell.
      red = jnp.right_shift(self._light_word(g.red), self._view_light) & 1
      red = red.astype(jnp.int32)
      tog = jnp.right_shift(self._light_word(g.toggled), self._view_light) & 1
      tog = tog.astype(jnp.int32)
    else:
      grid = jnp.asarray(self._light_grid)
      red = jnp.any(g.red[:, None] & grid, axis=0).astype(jnp.int32)
      tog = jnp.any(g.toggled[:, None] & grid, axis=0).astype(jnp.int32)
    # Constant planes: the mover and the round (none once the game is over).
    const = self._channel_bits(T + 1 + player)
    const = const + jnp.where(g.round < rounds, self._channel_bits(T + 1 + n + g.round), 0)
    entry = self._view_entry  # [layers, lanes, cells], static
    # Static 0/1 masks as int factors: products, not `where`, feed the sum
    # (XLA's CPU reduction of a select is several times slower).
    layer0 = (np.arange(entry.shape[0]) == 0).astype(np.int32)[:, None, None]  # [layers, 1, 1]
    lane0 = (np.arange(L) == 0).astype(np.int32)[:, None, None, None]  # [lanes, 1, 1, 1]
    # Per lane: its car bits and its counter bit at its entry cell, in its
    # layer. [lanes, layers, words, cells]
    lane_bits = self._channel_bits(np.arange(L))[:, None, :, None] * layer0[None]  # static
    counter = self._channel_bits(L + 1 + g.counters)  # [lanes, words]
    lanes = occ[:, None, None, :] * lane_bits
    lanes = lanes + counter[:, None, :, None] * np.moveaxis(entry, 1, 0)[:, :, None, :]
    # The lights and the constant planes, in lane 0's term: a separate term
    # (a concatenation) would be split off the sum by XLA and recomputed for
    # every channel. [layers, words, cells]
    green = self._view_has_light - red  # [cells]
    light = jnp.left_shift(green, L % _BITS) + jnp.left_shift(red, _BITS)
    light_word = (np.arange(self._view_words) == L // _BITS).astype(np.int32)[:, None]
    tog_word = (np.arange(self._view_words) == T // _BITS).astype(np.int32)[:, None]
    light = light_word * light + tog_word * jnp.left_shift(tog, T % _BITS)  # [words, cells]
    rest = layer0 * (light + const[:, None])
    lanes = lanes + lane0 * rest[None]
    return jnp.sum(lanes, axis=0)

  def observe(self, g: CarchessState, player: jax.Array) -> jax.Array:
    """float32 `[height, width, C]`. Against the thesis (V-A 2.1), channel
    by channel on the defaults (4 lanes, counters 0..4, 2 players, 10 rounds):

      channels  thesis                              here
      0-3       cars of lane l (1 at a car)         the same
      4         lights: +1 green, -1 red, 0 none    the same
      5-9       spawn count x = 0..floor(c(a-2)):   the same, x up to the
                1 at the entry of each lane with    largest lane cap; 2 where
                count x                             two such lanes share an entry
      10        (none)                              lights toggled this round: 1
      11-12     player to move, a separate one-hot  the same, as constant planes
                vector (n)                          (the mover's view at decisions)
      13-22     round, a separate one-hot vector    the same, as constant planes;
                (r)                                 all zeros once the game is over

    The toggled plane (version 2) makes the observation Markov at decision
    nodes: with it, the planes hold every part of the state that decides the
    rest of the game (cars, lights, toggled lights, spawn counters, round,
    mover; the totals spawned/scored/crashed do not). Without it (the
    thesis', version 1), the second mover of a round cannot tell which light
    the first toggled, which is the one it may not toggle now: the legal mask
    comes beside the observation at the root, but a model imagining later
    states sees only what the planes held. Not shown: `chance_lane`, which
    lanes' counters a pending chance run has updated; it matters at chance
    nodes only (at a decision node none is pending).
    """
    m = self.map
    h, w, C = m.height, m.width, self.observation_shape[-1]
    # The small code per cell first, then the planes in one elementwise pass
    # (no dot, no concatenation, no transpose): writing the 23 float planes is
    # the cost, so XLA fuses it with the selects that follow in `Env.step`.
    code = self.observation_code(g, player)  # [layers, words, cells]
    layers, K = code.shape[0], code.shape[1]
    code = jnp.moveaxis(code, 1, 2).reshape(layers, h, w, K, 1)
    word = jnp.broadcast_to(code, (layers, h, w, K, _BITS)).reshape(layers, h, w, K * _BITS)
    word = word[..., :C]
    value = (jnp.right_shift(word, self._view_plus) & 1) - (
      jnp.right_shift(word, self._view_minus) & 1
    )
    return jnp.sum(value, axis=0).astype(jnp.float32)
