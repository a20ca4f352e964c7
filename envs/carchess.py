"""Carchess (thesis `002`, V-A 2): a collaborative traffic game with chance spawns.

The rules are those of `../shared/carchess/RULES.md` (the thesis' own
implementation); the defaults are the settings of thesis Table 2 on the map
"tutorial" (Table 3). Maps are data: see `envs/carchess_maps.py`.

Round structure (one round = `players` decisions, then simulation, then chance):
  1. Players 0, 1, ... each toggle one traffic light (red <-> green), all at
     different lights. Action = flat cell index `row * width + col` of the
     light; the legal actions are the lights not yet toggled this round.
  2. The last toggle runs `sim_steps` simulation steps; its reward is their sum
     (`score_reward` per car that reaches the end of its lane, `crash_reward`
     per crash count). Every player gets the same reward (collaborative).
  3. Chance, one node per lane in lane order: the lane's spawn counter grows by
     `min(x, capacity_left)`, `x` uniform on `{spawn_min..spawn_max}`,
     `capacity_left = floor((lane length - 2) * density) - counter`. Outcome
     index = the actual increment; the clipped mass is summed into
     `capacity_left`. These nodes are skipped after the last round.
The game starts with no cars, each light red with probability 1/2 (drawn from
the `init` key) and one spawn-counter chance node per lane.

A simulation step, on the board as it was at the start of the step: a car on a
red light stays. Otherwise, if the next cell of its lane holds a car of the same
lane, or of another lane heading the same way there, it moves only if that car
moves (recursively); a car of a crossing lane there does not stop it. All
movable cars advance at once; one that reaches the last cell of its lane leaves
and scores. Then each lane with a counter > 0 whose entry cell is free spawns a
car there. Finally every cell holding k >= 2 cars loses them all, and the crash
count grows by k - 1.

Observation float32 `[height, width, C]`, C = lanes + 1 + (max capacity + 1)
+ players + rounds: one plane per lane with its cars; the light plane (+1 green,
-1 red, 0 no light); one plane per spawn-counter value 0..max capacity with a 1
at the entry cell of each lane whose counter has that value; then constant
planes, one-hot of the player to move and one-hot of the round (all zeros once
the game is over).
"""

from __future__ import annotations

import math
from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.carchess_maps import CarchessMap, load_map
from envs.core import CHANCE, TERMINAL, Game
from envs.registry import register


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


_ARROWS = {(-1, 0): "^", (1, 0): "v", (0, 1): ">", (0, -1): "<"}


@register
class Carchess(Game):
  """Carchess on a map from `envs/maps/` (default "tutorial")."""

  name = "carchess"
  version = 1
  payoff = "collaborative"
  default_params = {
      "map": "tutorial",
      "players": 2,
      "sim_steps": 5,
      "rounds": 10,
      "density": 0.5,
      "spawn_min": 0,
      "spawn_max": 4,
      "score_reward": 2.0,
      "crash_reward": -1.0,
  }

  @classmethod
  def validate_params(cls, params):
    m = load_map(params["map"])
    n = params["players"]
    if not 1 <= n <= len(m.lights):
      raise ValueError(f"carchess: players must be in 1..{len(m.lights)} (each round "
                       f"every player toggles a different light; map {m.name!r} has "
                       f"{len(m.lights)} lights), got {n}")
    for key in ("sim_steps", "rounds"):
      if params[key] < 1:
        raise ValueError(f"carchess: {key} must be >= 1, got {params[key]}")
    if not 0.0 < params["density"] <= 1.0:
      raise ValueError(f"carchess: density must be in (0, 1], got {params['density']}")
    if not 0 <= params["spawn_min"] <= params["spawn_max"]:
      raise ValueError("carchess: need 0 <= spawn_min <= spawn_max, got "
                       f"spawn_min={params['spawn_min']}, spawn_max={params['spawn_max']}")

  def __init__(self, **params):
    super().__init__(**params)
    self.map: CarchessMap = load_map(self.params["map"])
    self._build_tables()

  def _build_tables(self) -> None:
    """Static numpy tables of the map, indexed by node n = lane * A + pos."""
    m = self.map
    L, A, W = m.num_lanes, m.max_lane_length, m.width
    hw = m.height * W
    self._hw = hw
    lengths = np.array([len(lane) for lane in m.lanes], np.int32)
    cell = np.full((L, A), hw, np.int32)  # hw: a dummy cell for padding
    heading = np.zeros((L, A, 2), np.int32)
    for l, lane in enumerate(m.lanes):
      for i, (r, c) in enumerate(lane):
        cell[l, i] = r * W + c
        a, b = (lane[i], lane[i + 1]) if i + 1 < len(lane) else (lane[i - 1], lane[i])
        heading[l, i] = (b[0] - a[0], b[1] - a[1])
    stand = np.arange(A)[None, :] <= lengths[:, None] - 2
    n_nodes = L * A
    flat_cell = cell.reshape(-1)
    # Who can block node (l, i): a car standing on the next cell of lane l,
    # of lane l itself or of a lane heading the same way there.
    cands = [[] for _ in range(n_nodes)]
    for l in range(L):
      for i in range(lengths[l] - 1):
        target = cell[l, i + 1]
        for l2 in range(L):
          for j in range(lengths[l2] - 1):
            if cell[l2, j] == target and (
                l2 == l or tuple(heading[l2, j]) == tuple(heading[l, i + 1])):
              cands[l * A + i].append(l2 * A + j)
    k = max(1, max(len(c) for c in cands))
    blockers = np.full((n_nodes, k), n_nodes, np.int32)  # n_nodes: never occupied
    for n, c in enumerate(cands):
      blockers[n, :len(c)] = c
    light_cells = np.array([r * W + c for r, c in m.lights], np.int32)
    cell_light = np.full((hw,), -1, np.int32)
    cell_light[light_cells] = np.arange(len(m.lights))
    caps = np.floor((lengths - 2) * self.params["density"] + 1e-9).astype(np.int32)

    self._lengths = lengths
    self._cell = cell
    self._heading = heading
    self._stand = stand
    self._flat_cell = flat_cell
    self._blockers = blockers
    self._jumps = max(1, math.ceil(math.log2(n_nodes)))
    self._light_cells = light_cells
    self._cell_light = cell_light
    self._caps = caps
    self._entry = cell[:, 0].copy()
    self._max_cap = int(caps.max())

  # Static facts.
  @property
  def num_players(self) -> int:
    return self.params["players"]

  @property
  def num_lanes(self) -> int:
    return self.map.num_lanes

  @property
  def num_lights(self) -> int:
    return len(self.map.lights)

  @property
  def num_actions(self) -> int:
    return self.map.height * self.map.width

  @property
  def num_chance_outcomes(self) -> int:
    return min(self.params["spawn_max"], self._max_cap) + 1

  @property
  def capacities(self) -> np.ndarray:
    """int32 `[lanes]`: the cap of each lane's spawn counter."""
    return self._caps.copy()

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    c = (self.num_lanes + 1 + self._max_cap + 1 + self.num_players
         + self.params["rounds"])
    return (self.map.height, self.map.width, c)

  @property
  def max_game_length(self) -> int:
    r, n, L = self.params["rounds"], self.num_players, self.num_lanes
    return L + r * n + (r - 1) * L

  # Rules.
  def init(self, key: jax.Array) -> CarchessState:
    L, A = self.num_lanes, self.map.max_lane_length
    zero = jnp.int32(0)
    return CarchessState(
        cars=jnp.zeros((L, A), jnp.bool_),
        red=jax.random.bernoulli(key, 0.5, (self.num_lights,)),
        toggled=jnp.zeros((self.num_lights,), jnp.bool_),
        counters=jnp.zeros((L,), jnp.int32),
        round=zero, turn=zero, chance_lane=zero,
        spawned=zero, scored=zero, crashed=zero, crashes=zero)

  def current_player(self, g: CarchessState) -> jax.Array:
    return jnp.where(g.round >= self.params["rounds"], TERMINAL,
                     jnp.where(g.chance_lane < self.num_lanes, CHANCE,
                               g.turn)).astype(jnp.int32)

  def legal_action_mask(self, g: CarchessState) -> jax.Array:
    light = jnp.asarray(self._cell_light)
    untoggled = ~g.toggled[jnp.maximum(light, 0)]
    return (light >= 0) & untoggled

  def chance_probs(self, g: CarchessState) -> jax.Array:
    lane = jnp.minimum(g.chance_lane, self.num_lanes - 1)
    left = jnp.asarray(self._caps)[lane] - g.counters[lane]
    lo, hi = self.params["spawn_min"], self.params["spawn_max"]
    p = 1.0 / (hi - lo + 1)
    v = jnp.arange(self.num_chance_outcomes)
    px = jnp.where((v >= lo) & (v <= hi), p, 0.0)
    tail = (hi - jnp.maximum(lo, left) + 1).clip(0) * p  # P(x >= left)
    return jnp.where(v < left, px, jnp.where(v == left, tail, 0.0)).astype(jnp.float32)

  def apply_chance(self, g: CarchessState, outcome: jax.Array):
    lane = jnp.minimum(g.chance_lane, self.num_lanes - 1)
    g = g.replace(counters=g.counters.at[lane].add(outcome.astype(jnp.int32)),
                  chance_lane=g.chance_lane + 1)
    return g, jnp.zeros((self.num_players,), jnp.float32)

  def apply_action(self, g: CarchessState, action: jax.Array):
    light = jnp.maximum(jnp.asarray(self._cell_light)[action], 0)
    g = g.replace(red=g.red.at[light].set(~g.red[light]),
                  toggled=g.toggled.at[light].set(True), turn=g.turn + 1)

    def end_round(g):
      g, reward = self.simulate(g, self.params["sim_steps"])
      rnd = g.round + 1
      g = g.replace(toggled=jnp.zeros_like(g.toggled), turn=jnp.int32(0),
                    round=rnd,
                    chance_lane=jnp.where(rnd < self.params["rounds"], 0,
                                          self.num_lanes).astype(jnp.int32))
      return g, reward

    g, reward = jax.lax.cond(g.turn >= self.num_players, end_round,
                             lambda g: (g, jnp.float32(0.0)), g)
    return g, jnp.full((self.num_players,), reward, jnp.float32)

  # The simulation.
  def movable(self, g: CarchessState) -> jax.Array:
    """bool `[lanes, max_lane_length]`: the cars that move in the next step."""
    L, A = g.cars.shape
    n = L * A
    occ = g.cars.reshape(n)
    red_cell = jnp.zeros((self._hw + 1,), jnp.bool_).at[
        jnp.asarray(self._light_cells)].set(g.red)
    val = ~red_cell[jnp.asarray(self._flat_cell)]
    blockers = jnp.asarray(self._blockers)
    there = jnp.concatenate([occ, jnp.zeros((1,), jnp.bool_)])[blockers]
    first = blockers[jnp.arange(n), jnp.argmax(there, axis=-1)]
    ptr = jnp.where(there.any(-1), first, jnp.arange(n))
    # Pointer jumping: a car moves iff no car along its chain of blockers
    # stands on a red light (a chain ends at a car with nothing ahead).
    for _ in range(self._jumps):
      val = val & val[ptr]
      ptr = ptr[ptr]
    return (occ & val).reshape(L, A)

  def simulation_step(self, g: CarchessState) -> Tuple[CarchessState, jax.Array, jax.Array]:
    """One simulation step. Returns (g', cars scored, crash count), int32 `[]`."""
    stand = jnp.asarray(self._stand)
    cars = g.cars
    moved = cars & self.movable(g)
    arrive = jnp.pad(moved[:, :-1], ((0, 0), (1, 0)))
    last = jnp.arange(cars.shape[1])[None, :] == jnp.asarray(self._lengths)[:, None] - 2
    scored = jnp.sum(moved & last).astype(jnp.int32)
    cars = ((cars & ~moved) | arrive) & stand
    flat_cell = jnp.asarray(self._flat_cell)
    entry = jnp.asarray(self._entry)
    count = jnp.zeros((self._hw + 1,), jnp.int32).at[flat_cell].add(
        cars.reshape(-1).astype(jnp.int32))
    spawn = (count[entry] == 0) & (g.counters > 0)
    cars = cars.at[:, 0].set(cars[:, 0] | spawn)
    count = count.at[entry].add(spawn.astype(jnp.int32)).at[self._hw].set(0)
    crash_cell = count >= 2
    crashes = jnp.sum(jnp.where(crash_cell, count - 1, 0)).astype(jnp.int32)
    removed = jnp.sum(jnp.where(crash_cell, count, 0)).astype(jnp.int32)
    cars = cars & ~crash_cell[self._cell]
    g = g.replace(cars=cars, counters=g.counters - spawn.astype(jnp.int32),
                  spawned=g.spawned + jnp.sum(spawn).astype(jnp.int32),
                  scored=g.scored + scored, crashed=g.crashed + removed,
                  crashes=g.crashes + crashes)
    return g, scored, crashes

  def simulate(self, g: CarchessState, steps: int) -> Tuple[CarchessState, jax.Array]:
    """`steps` simulation steps. Returns (g', float32 `[]` summed reward)."""
    sr, cr = self.params["score_reward"], self.params["crash_reward"]

    def body(_, carry):
      g, total = carry
      g, scored, crashes = self.simulation_step(g)
      return g, total + sr * scored + cr * crashes

    return jax.lax.fori_loop(0, steps, body, (g, jnp.float32(0.0)))

  # Views.
  def observe(self, g: CarchessState, player: jax.Array) -> jax.Array:
    m = self.map
    h, w, hw = m.height, m.width, self._hw
    L = self.num_lanes
    lane_idx = jnp.broadcast_to(jnp.arange(L)[:, None], g.cars.shape)
    lanes = jnp.zeros((L, hw + 1), jnp.float32).at[
        lane_idx, jnp.asarray(self._cell)].max(g.cars.astype(jnp.float32))[:, :hw]
    lights = jnp.zeros((hw,), jnp.float32).at[jnp.asarray(self._light_cells)].set(
        jnp.where(g.red, -1.0, 1.0))
    counts = jnp.zeros((self._max_cap + 1, hw), jnp.float32).at[
        jnp.clip(g.counters, 0, self._max_cap), jnp.asarray(self._entry)].max(1.0)
    planes = jnp.concatenate([lanes, lights[None], counts], axis=0)
    planes = planes.reshape(-1, h, w).transpose(1, 2, 0)
    who = jax.nn.one_hot(player, self.num_players, dtype=jnp.float32)
    rnd = jax.nn.one_hot(g.round, self.params["rounds"], dtype=jnp.float32)
    const = jnp.broadcast_to(jnp.concatenate([who, rnd]), (h, w, who.size + rnd.size))
    return jnp.concatenate([planes, const], axis=-1)

  def render(self, g: CarchessState) -> str:
    """The grid with a one-cell margin: lanes as arrows (`+` where lanes
    cross), lights `R`/`G` (lower case once toggled this round), cars as lane
    letters `A`, `B`, ..., spawn counters as digits in the margin before each
    entry; then a legend."""
    m = self.map
    h, w = m.height, m.width
    grid = [[" "] * (w + 2) for _ in range(h + 2)]
    for r in range(h):
      for c in range(w):
        grid[r + 1][c + 1] = "."
    uses = {}
    for l, lane in enumerate(m.lanes):
      for i, (r, c) in enumerate(lane):
        uses.setdefault((r, c), []).append(_ARROWS[tuple(self._heading[l, i])])
    for (r, c), arrows in uses.items():
      grid[r + 1][c + 1] = arrows[0] if len(arrows) == 1 else "+"
    red = np.asarray(g.red)
    toggled = np.asarray(g.toggled)
    for k, (r, c) in enumerate(m.lights):
      ch = "R" if red[k] else "G"
      grid[r + 1][c + 1] = ch.lower() if toggled[k] else ch
    cars = np.asarray(g.cars)
    for l, lane in enumerate(m.lanes):
      for i in np.flatnonzero(cars[l]):
        r, c = lane[i]
        grid[r + 1][c + 1] = chr(ord("A") + l) if l < 26 else "*"
    counters = np.asarray(g.counters)
    for l, lane in enumerate(m.lanes):
      (r, c), (dr, dc) = lane[0], self._heading[l, 0]
      mr, mc = r - dr + 1, c - dc + 1
      if (mr in (0, h + 1) or mc in (0, w + 1)) and grid[mr][mc] == " ":
        grid[mr][mc] = str(counters[l]) if counters[l] < 10 else "+"
    lines = ["".join(row).rstrip() for row in grid]
    rnd, rounds = int(g.round), self.params["rounds"]
    player = int(self.current_player(g))
    who = ("game over" if player == TERMINAL else
           f"chance: spawn counter of lane {int(g.chance_lane)}" if player == CHANCE
           else f"player {player} to move")
    lines.append(f"round {min(rnd + 1, rounds)}/{rounds}, {who}; scored {int(g.scored)}, "
                 f"crashes {int(g.crashes)} ({int(g.crashed)} cars), "
                 f"spawned {int(g.spawned)}")
    for l, lane in enumerate(m.lanes):
      lines.append(f"lane {l} ({chr(ord('A') + l) if l < 26 else '*'}): enters "
                   f"{list(lane[0])} {_ARROWS[tuple(self._heading[l, 0])]}, "
                   f"spawn counter {int(counters[l])}/{int(self._caps[l])}")
    lights = ", ".join(f"{list(cell)} {'red' if red[k] else 'green'}"
                       f"{' (toggled)' if toggled[k] else ''}"
                       for k, cell in enumerate(m.lights))
    lines.append(f"lights: {lights}")
    return "\n".join(lines)

  def action_to_string(self, g, action: int) -> str:
    w = self.map.width
    if 0 <= action < self.num_actions:
      return f"toggle ({action // w},{action % w})"
    return str(action)
