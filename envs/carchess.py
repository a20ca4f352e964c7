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
+ 1 + players + rounds: one plane per lane with its cars; the light plane (+1
green, -1 red, 0 no light); one plane per spawn-counter value 0..max capacity
with a 1 at the entry cell of each lane whose counter has that value; the
toggled plane (1 at each light toggled this round: those lights are not legal
again this round); then constant planes, one-hot of the player to move and
one-hot of the round (all zeros once the game is over). The thesis' planes
without the toggled one, which version 1 lacked (see `Carchess.observe`).
"""

from __future__ import annotations

from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np

from envs.carchess_bits import LaneBits
from envs.carchess_view import CarchessViews
from envs.carchess_maps import CarchessMap, load_map
from envs.carchess_state import CarchessState as CarchessState
from envs.core import CHANCE, TERMINAL, Game
from envs.registry import register


_ARROWS = {(-1, 0): "^", (1, 0): "v", (0, 1): ">", (0, -1): "<"}
# Observation channels per int32 code word (see `Carchess.observe`); bit


@register
class Carchess(LaneBits, CarchessViews, Game):
  """Carchess on a map from `envs/maps/` (default "tutorial")."""

  name = "carchess"
  # 2: the observation gained the toggled-this-round plane (23 channels on
  # the defaults, not 22); checkpoints of version 1 are refused.
  version = 2
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
      raise ValueError(
        f"carchess: players must be in 1..{len(m.lights)} (each round "
        f"every player toggles a different light; map {m.name!r} has "
        f"{len(m.lights)} lights), got {n}"
      )
    for key in ("sim_steps", "rounds"):
      if params[key] < 1:
        raise ValueError(f"carchess: {key} must be >= 1, got {params[key]}")
    if not 0.0 < params["density"] <= 1.0:
      raise ValueError(f"carchess: density must be in (0, 1], got {params['density']}")
    if not 0 <= params["spawn_min"] <= params["spawn_max"]:
      raise ValueError(
        "carchess: need 0 <= spawn_min <= spawn_max, got "
        f"spawn_min={params['spawn_min']}, spawn_max={params['spawn_max']}"
      )

  def __init__(self, **params):
    super().__init__(**params)
    self.map: CarchessMap = load_map(self.params["map"])
    self._build_tables()

  def _build_tables(self) -> None:
    """Static numpy tables of the map, built once. Nodes n = lane * A +
    position (A = the longest lane). The simulation runs on lane bit masks
    with static index tables (lanes of <= 32 cells) or on dense boolean
    masks; the observation on 0/1 matrices. No scatter, no data-dependent
    gather, no control flow."""
    m = self.map
    L, A, W = m.num_lanes, m.max_lane_length, m.width
    hw = m.height * W
    n_nodes = L * A
    lengths = np.array([len(lane) for lane in m.lanes], np.int32)
    cell = np.full((L, A), -1, np.int32)  # flat grid cell of each node
    heading = np.zeros((L, A, 2), np.int32)
    for l, lane in enumerate(m.lanes):
      for i, (r, c) in enumerate(lane):
        cell[l, i] = r * W + c
        a, b = (lane[i], lane[i + 1]) if i + 1 < len(lane) else (lane[i - 1], lane[i])
        heading[l, i] = (b[0] - a[0], b[1] - a[1])
    stand = np.arange(A)[None, :] <= lengths[:, None] - 2  # never the last cell
    flat_cell, flat_stand = cell.reshape(-1), stand.reshape(-1)

    # Who can block node (l, i): a car standing on the next cell of lane l, of
    # lane l itself (node (l, i + 1)) or of a lane heading the same way there.
    links = {n: [] for n in range(n_nodes)}
    cross = np.zeros((n_nodes, n_nodes), np.float32)  # [blocker, blocked]
    for l in range(L):
      for i in range(lengths[l] - 1):
        target = cell[l, i + 1]
        for l2 in range(L):
          for j in range(lengths[l2] - 1):
            if cell[l2, j] != target:
              continue
            if l2 == l:
              links[l * A + i].append(l2 * A + j)
            elif tuple(heading[l2, j]) == tuple(heading[l, i + 1]):
              links[l * A + i].append(l2 * A + j)
              cross[l2 * A + j, l * A + i] = 1.0

    # A car's chain of blockers follows these links; resolving it takes one
    # iteration per link, so bound the chain by the longest path (or by the
    # number of nodes if the links have a cycle).
    depth, state = {}, {}

    def longest(n):
      if state.get(n) == 1:
        raise RecursionError
      if n not in depth:
        state[n] = 1
        depth[n] = 1 + max((longest(c) for c in links[n]), default=0)
        state[n] = 2
      return depth[n]

    try:
      chain = max(longest(n) for n in range(n_nodes))
    except RecursionError:
      chain = int(flat_stand.sum())

    # Dense static masks over the nodes `[.., lanes, max_lane_length]`, for
    # the dense simulation (lanes longer than 32 cells) and the views.
    cell_nodes = {}
    for n in np.flatnonzero(flat_stand):
      cell_nodes.setdefault(int(flat_cell[n]), []).append(int(n))
    # Only cells where two or more nodes meet can ever hold two cars.
    shared = [c for c in sorted(cell_nodes) if len(cell_nodes[c]) >= 2]
    shared_mask = np.zeros((len(shared), n_nodes), bool)
    for k, c in enumerate(shared):
      shared_mask[k, cell_nodes[c]] = True
    entry_nodes = np.zeros((L, n_nodes), bool)  # the nodes on lane l's entry
    entry_shared = np.zeros((L, len(shared)), bool)
    for l in range(L):
      entry_nodes[l, cell_nodes[int(cell[l, 0])]] = True
      if int(cell[l, 0]) in shared:
        entry_shared[l, shared.index(int(cell[l, 0]))] = True
    light_cells = np.array([r * W + c for r, c in m.lights], np.int32)
    light_node = (light_cells[:, None] == flat_cell[None, :]) & flat_stand[None, :]
    node_grid = np.zeros((L, A, hw), bool)  # [lane, position, cell]
    for l in range(L):
      for i in range(lengths[l] - 1):
        node_grid[l, i, cell[l, i]] = True
    caps = np.floor((lengths - 2) * self.params["density"] + 1e-9).astype(np.int32)

    self._hw = hw
    self._lengths = lengths
    self._cell = cell
    self._heading = heading
    self._stand = stand
    self._last = np.arange(A)[None, :] == lengths[:, None] - 2
    self._cross = cross if cross.any() else None
    self._iterations = chain - 1
    self._shared_mask = shared_mask.reshape(len(shared), L, A)
    self._entry_nodes = entry_nodes.reshape(L, L, A)
    self._entry_shared = entry_shared
    self._light_node = light_node.reshape(-1, L, A)
    self._light_cells = light_cells
    self._light_grid = np.eye(hw, dtype=bool)[light_cells]  # [light, cell]
    self._node_grid = node_grid
    self._caps = caps
    self._max_cap = int(caps.max())
    self._build_view_tables()

    # Lanes as bit masks (bit i = position i), for lanes of <= 32 cells: a
    # simulation step is then a handful of integer ops per lane, and the
    # cross-lane facts are static index tables over a few words.
    self._bits = A <= 32
    if self._bits:
      pad = L  # index of an all-zero extra lane word

      def table(groups, width):
        lanes = np.full((len(groups), max(width, 1)), pad, np.int32)
        pos = np.zeros((len(groups), max(width, 1)), np.uint32)
        for k, nodes in enumerate(groups):
          for j, n in enumerate(nodes):
            lanes[k, j], pos[k, j] = divmod(n, A)
        return lanes, pos

      groups = [cell_nodes[c] for c in shared]
      self._shared_lane, self._shared_pos = table(groups, max((len(x) for x in groups), default=1))
      # Removing the cars of crash cells: per shared cell, the bits of its
      # nodes in their lanes' words `[cells, lanes]` (padding: lane L, none).
      onehot = (self._shared_lane[..., None] == np.arange(L)).astype(np.uint64)
      self._shared_rows = np.sum(
        onehot << self._shared_pos[..., None].astype(np.uint64), axis=1
      ).astype(np.uint32)
      groups = [cell_nodes[int(cell[l, 0])] for l in range(L)]
      self._entry_lane, self._entry_pos = table(groups, max(len(x) for x in groups))
      self._stand_bits = ((1 << (lengths - 1).astype(np.uint64)) - 1).astype(np.uint32)
      self._last_pos = (lengths - 2).astype(np.uint32)
      self._light_bits = np.sum(
        self._light_node.astype(np.uint64) << np.arange(A, dtype=np.uint64), axis=-1
      ).astype(np.uint32)
      if self._cross is not None:
        # Cross-lane blockers, grouped by the node they block.
        blocked = {}
        for b, n in zip(*np.nonzero(cross)):
          blocked.setdefault(int(n), []).append(int(b))
        targets = sorted(blocked)
        self._cross_lane, self._cross_pos = table(
          [blocked[t] for t in targets], max(len(v) for v in blocked.values())
        )
        t_lane, t_pos = np.divmod(np.array(targets), A)
        self._cross_target = (
          (t_lane[:, None] == np.arange(L)).astype(np.uint64) << t_pos[:, None].astype(np.uint64)
        ).astype(np.uint32)

  # Static facts.
  @property
  def num_players(self) -> int:
    return self.params["players"]

  @property
  def num_lanes(self) -> int:
    return self.map.num_lanes

  chance_run_exact = True

  @property
  def max_chance_run(self) -> int:
    return self.num_lanes  # one spawn-counter node per lane, then a decision

  @property
  def num_lights(self) -> int:
    return len(self.map.lights)

  @property
  def num_actions(self) -> int:
    return self.map.height * self.map.width

  @property
  def max_legal_actions(self) -> int:
    """Each light is one action (its cell), legal until toggled this round."""
    return self.num_lights

  @property
  def num_chance_outcomes(self) -> int:
    return min(self.params["spawn_max"], self._max_cap) + 1

  @property
  def capacities(self) -> np.ndarray:
    """int32 `[lanes]`: the cap of each lane's spawn counter."""
    return self._caps.copy()

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    c = self._toggled_channel + 1 + self.num_players + self.params["rounds"]
    return (self.map.height, self.map.width, c)

  @property
  def _toggled_channel(self) -> int:
    """The toggled plane's channel: after the lanes, the light plane and
    the spawn-counter planes (the thesis' image planes keep their places)."""
    return self.num_lanes + 1 + self._max_cap + 1

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
      round=zero,
      turn=zero,
      chance_lane=zero,
      spawned=zero,
      scored=zero,
      crashed=zero,
      crashes=zero,
    )

  def current_player(self, g: CarchessState) -> jax.Array:
    return jnp.where(
      g.round >= self.params["rounds"],
      TERMINAL,
      jnp.where(g.chance_lane < self.num_lanes, CHANCE, g.turn),
    ).astype(jnp.int32)

  def legal_action_mask(self, g: CarchessState) -> jax.Array:
    if self.num_lights > 32:
      return jnp.any(~g.toggled[:, None] & jnp.asarray(self._light_grid), axis=0)
    # The lights still free as one word, read at each light's cell.
    return (jnp.right_shift(self._light_word(~g.toggled), self._view_light) & 1).astype(jnp.bool_)

  def _light_word(self, x: jax.Array) -> jax.Array:
    """uint32 `[]`: bit k = x[k], for bool `[num_lights]` (<= 32 lights)."""
    # Shifts, not `where(x, weights, 0)`: XLA's CPU reduction of a select is
    # several times slower.
    shift = np.arange(self.num_lights, dtype=np.uint32)
    return jnp.sum(jnp.left_shift(x.astype(jnp.uint32), shift), dtype=jnp.uint32)

  def chance_probs(self, g: CarchessState) -> jax.Array:
    lane = jnp.arange(self.num_lanes) == g.chance_lane
    left = jnp.sum((jnp.asarray(self._caps) - g.counters) * lane)
    lo, hi = self.params["spawn_min"], self.params["spawn_max"]
    p = 1.0 / (hi - lo + 1)
    v = jnp.arange(self.num_chance_outcomes)
    px = jnp.where((v >= lo) & (v <= hi), p, 0.0)
    tail = (hi - jnp.maximum(lo, left) + 1).clip(0) * p  # P(x >= left)
    return jnp.where(v < left, px, jnp.where(v == left, tail, 0.0)).astype(jnp.float32)

  def apply_chance(self, g: CarchessState, outcome: jax.Array):
    lane = jnp.arange(self.num_lanes) == g.chance_lane
    g = g.replace(
      counters=g.counters + jnp.where(lane, outcome, 0).astype(jnp.int32),
      chance_lane=g.chance_lane + 1,
    )
    return g, jnp.zeros((self.num_players,), jnp.float32)

  def apply_action(self, g: CarchessState, action: jax.Array):
    flip = jnp.asarray(self._light_cells) == action  # one-hot, no scatter
    g = g.replace(red=g.red ^ flip, toggled=g.toggled | flip, turn=g.turn + 1)
    # The round's simulation runs on every lane and is kept where the round
    # ends: under vmap a `cond` would run it anyway, and then select.
    end = g.turn >= self.num_players
    sim, reward = self.simulate(g, self.params["sim_steps"])
    rnd = g.round + 1
    sim = sim.replace(
      toggled=jnp.zeros_like(g.toggled),
      turn=jnp.int32(0),
      round=rnd,
      chance_lane=jnp.where(rnd < self.params["rounds"], 0, self.num_lanes).astype(jnp.int32),
    )
    g = jax.tree.map(lambda a, b: jnp.where(end, a, b), sim, g)
    reward = jnp.where(end, reward, 0.0)
    return g, jnp.full((self.num_players,), reward, jnp.float32)

  # The simulation.
  def movable(self, g: CarchessState) -> jax.Array:
    """bool `[lanes, max_lane_length]`: the cars that move in the next step."""
    if self._bits:
      red = self._red_bits(g.red)
      return self._from_bits(self._movable_bits(self._to_bits(g.cars), red))
    return self._movable_dense(g)

  def _movable_dense(self, g: CarchessState) -> jax.Array:
    cars = g.cars
    shape = cars.shape
    red = jnp.any(g.red[:, None, None] & jnp.asarray(self._light_node), axis=0)
    if self._cross is None:
      # Blockers are only the next car of the same lane: a car is stuck iff
      # some car of its unbroken queue ahead stands on a red light. Carry
      # "stuck" back along the queues by doubling (log2 of the lane length
      # rounds, as in a parallel prefix).
      stuck, queue = cars & red, cars
      k = 1
      while k < shape[1]:
        ahead = lambda x, k=k: jnp.pad(x[:, k:], ((0, 0), (0, k)))
        stuck = stuck | (queue & ahead(stuck))
        queue = queue & ahead(queue)
        k *= 2
      return cars & ~stuck
    free = ~red
    move = free
    # With blockers on other lanes (lanes that merge), follow the links one
    # at a time: each iteration carries "stuck" one link back.
    for _ in range(self._iterations):
      stuck = cars & ~move
      blocked = jnp.pad(stuck[:, 1:], ((0, 0), (0, 1)))  # same lane, next cell
      flat = stuck.reshape(-1).astype(jnp.float32) @ jnp.asarray(self._cross)
      blocked = blocked | (flat > 0).reshape(shape)
      move = free & ~blocked
    return cars & move

  def simulation_step(self, g: CarchessState) -> Tuple[CarchessState, jax.Array, jax.Array]:
    """One simulation step. Returns (g', cars scored, crash count), int32 `[]`."""
    if not self._bits:
      return self._simulation_step_dense(g)
    return self._simulate_bits(g, 1)

  def _simulation_step_dense(self, g: CarchessState):
    cars = g.cars
    moved = self._movable_dense(g)
    scored = jnp.sum(moved & jnp.asarray(self._last)).astype(jnp.int32)
    arrive = jnp.pad(moved[:, :-1], ((0, 0), (1, 0)))
    cars = ((cars & ~moved) | arrive) & jnp.asarray(self._stand)
    # A lane spawns onto its entry cell if no car stands there.
    entry_busy = jnp.any(cars & jnp.asarray(self._entry_nodes), axis=(1, 2))
    spawn = ~entry_busy & (g.counters > 0)
    first = jnp.arange(cars.shape[1])[None, :] == 0
    cars = cars | (spawn[:, None] & first)
    # Crashes: only where lanes share a cell.
    shared = jnp.asarray(self._shared_mask)  # [cells, lanes, positions]
    count = jnp.sum(cars & shared, axis=(1, 2), dtype=jnp.int32)
    crash_cell = count >= 2
    crashes = jnp.sum(jnp.where(crash_cell, count - 1, 0)).astype(jnp.int32)
    removed = jnp.sum(jnp.where(crash_cell, count, 0)).astype(jnp.int32)
    crashed = jnp.any(crash_cell[:, None, None] & shared, axis=0)
    cars = cars & ~crashed
    spawn = spawn.astype(jnp.int32)
    g = g.replace(
      cars=cars,
      counters=g.counters - spawn,
      spawned=g.spawned + jnp.sum(spawn),
      scored=g.scored + scored,
      crashed=g.crashed + removed,
      crashes=g.crashes + crashes,
    )
    return g, scored, crashes

  def simulate(self, g: CarchessState, steps: int) -> Tuple[CarchessState, jax.Array]:
    """`steps` simulation steps. Returns (g', float32 `[]` summed reward)."""
    sr, cr = self.params["score_reward"], self.params["crash_reward"]
    if self._bits:
      # The reward is linear in the counts: one sum after the last step.
      g, scored, crashes = self._simulate_bits(g, steps)
      return g, sr * scored + cr * crashes
    total = jnp.float32(0.0)
    for _ in range(steps):  # unrolled: a handful of steps, no loop
      g, scored, crashes = self._simulation_step_dense(g)
      total = total + sr * scored + cr * crashes
    return g, total

  # Views: the observation (`CarchessViews`, envs/carchess_view.py); the text.
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
    who = (
      "game over"
      if player == TERMINAL
      else f"chance: spawn counter of lane {int(g.chance_lane)}"
      if player == CHANCE
      else f"player {player} to move"
    )
    lines.append(
      f"round {min(rnd + 1, rounds)}/{rounds}, {who}; scored {int(g.scored)}, "
      f"crashes {int(g.crashes)} ({int(g.crashed)} cars), "
      f"spawned {int(g.spawned)}"
    )
    for l, lane in enumerate(m.lanes):
      lines.append(
        f"lane {l} ({chr(ord('A') + l) if l < 26 else '*'}): enters "
        f"{list(lane[0])} {_ARROWS[tuple(self._heading[l, 0])]}, "
        f"spawn counter {int(counters[l])}/{int(self._caps[l])}"
      )
    lights = ", ".join(
      f"{list(cell)} {'red' if red[k] else 'green'}{' (toggled)' if toggled[k] else ''}"
      for k, cell in enumerate(m.lights)
    )
    lines.append(f"lights: {lights}")
    return "\n".join(lines)

  def action_to_string(self, g, action: int) -> str:
    w = self.map.width
    if 0 <= action < self.num_actions:
      return f"toggle ({action // w},{action % w})"
    return str(action)
