"""EinStein würfelt nicht! (paper `003`, section 2.2; OpenSpiel
`einstein_wurfelt_nicht`).

A 5x5 board. Player 0 (black, OpenSpiel's `b`) starts with pieces 1..6 on the
squares with row + col <= 2 and moves toward the corner (4, 4); player 1
(white, `w`) starts on row + col >= 6 and moves toward (0, 0). As in OpenSpiel,
player 1 moves first. Each turn a die (an explicit chance node, outcomes 0..5
for the faces 1..6) names the piece to move; if that piece is gone, the
nearest lower and the nearest higher remaining piece may move, and the mover
chooses when both exist. A piece steps to one of the three adjacent squares
toward its target corner (straight along the row, along the column, or
diagonally) and captures whatever stands there, own pieces included. A side
wins by reaching its target corner or by capturing the last enemy piece; the
winner gets +1, the loser -1. Every move brings a piece closer to its corner,
so a side makes at most 40 moves.

Parameter `placement` (the starting layout of each side):
* "random" (default): `init(key)` draws both layouts uniformly (6! each);
  chance outcomes are then only the die, `num_chance_outcomes == 6`.
* "chance": two explicit chance nodes come first, black's layout then white's,
  each with 720 equiprobable outcomes numbered exactly as OpenSpiel numbers
  them (index of the permutation of 1..6 in lexicographic order, written onto
  the start squares in row-major order). `num_chance_outcomes == 720`; at a
  die node only outcomes 0..5 are possible. This mode reproduces OpenSpiel's
  game tree exactly.
* "standard": a fixed, point-symmetric layout: black 1 2 3 / 4 5 / 6 from the
  corner (0, 0) row by row, white the same seen from (4, 4) (OpenSpiel's
  placement outcomes 0 and 719).

Actions (75) are relative to the mover's point of view, in which the board is
turned by 180 degrees for player 1 so that both sides move toward (4, 4):
`action = 3 * (5 * row + col) + d` for the piece on that view square, with
d = 0 diagonal (+1, +1), 1 down the column (+1, 0), 2 along the row (0, +1).
`to_openspiel_action` / `from_openspiel_action` give the bijection with
OpenSpiel's 300 actions `((5 * row + col) * 6 + direction) * 2 + capture`.

Observation: float32 `[5, 5, 19]` from the mover's view (the player about to
move at decision nodes and at the die roll before their move; at the end, the
player who would move next, i.e. the loser): planes 0..5 the
mover's pieces 1..6, 6..11 the opponent's pieces 1..6, 12..17 the die face
(a constant plane, all zeros before the roll), 18 the mover's pieces that the
die allows to move.
"""

from __future__ import annotations

import itertools
from typing import Mapping, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.core import CHANCE, TERMINAL, Game
from envs.fusion import materialize
from envs.registry import register

SIZE = 5
NUM_SQUARES = SIZE * SIZE
NUM_PIECES = 6
NUM_ACTIONS = 3 * NUM_SQUARES
NUM_PLACEMENTS = 720  # 6!
PLACEMENTS = ("random", "chance", "standard")
NUM_PLANES = 19
# Square-index step of the three moves in the mover's view: diag, down, right.
_STEP = np.array([SIZE + 1, SIZE, 1], np.int32)
# _INSIDE[square, d]: the view move d from `square` stays on the board.
_INSIDE = np.array(
  [
    [r < SIZE - 1 and c < SIZE - 1, r < SIZE - 1, c < SIZE - 1]
    for r in range(SIZE)
    for c in range(SIZE)
  ],
  bool,
)
# Start squares in OpenSpiel's row-major fill order.
_START = np.array([[0, 1, 2, 5, 6, 10], [14, 18, 19, 22, 23, 24]], np.int32)
# OpenSpiel direction of each view direction d, per player: (dr, dc) offsets
# are {0: (1, 1), 1: (1, 0), 2: (0, 1), 3: (-1, 0), 4: (-1, -1), 5: (0, -1)}.
_OS_DIR = np.array([[0, 1, 2], [4, 3, 5]], np.int32)


def _placement_table() -> np.ndarray:
  """int32 `[2, 720, 6]`: square of piece k+1 of each side for each
  OpenSpiel placement outcome (lexicographic permutation index)."""
  table = np.zeros((2, NUM_PLACEMENTS, NUM_PIECES), np.int32)
  for idx, perm in enumerate(itertools.permutations(range(1, 7))):
    for side in range(2):
      for k, value in enumerate(perm):
        table[side, idx, value - 1] = _START[side, k]
  return table


PLACEMENT_SQUARES = _placement_table()
STANDARD_PLACEMENT = (0, NUM_PLACEMENTS - 1)


@struct.dataclass
class EinsteinState:
  """Game core state.

  Attributes:
    pos: int32 `[2, 6]`, the square (5 * row + col, absolute board) of piece
      k+1 of each player, -1 once captured (or not yet placed).
    placed: int32 `[]`, how many sides have been placed (0..2).
    die: int32 `[]`, the rolled face minus one (0..5), -1 before the roll.
    to_move: int32 `[]`, the player who moves after the next roll.
    winner: int32 `[]`, -1 while the game runs, else the winner.
  """

  pos: jax.Array
  placed: jax.Array
  die: jax.Array
  to_move: jax.Array
  winner: jax.Array


def view_squares(sq: jax.Array, player: jax.Array) -> jax.Array:
  """Maps absolute squares to `player`'s view (turned 180 degrees for player
  1) and back (the map is its own inverse); -1 stays -1. Any shape."""
  turned = jnp.where(player == 0, sq, NUM_SQUARES - 1 - sq)
  return jnp.where(sq < 0, -1, turned)


def selectable(pos_row: jax.Array, die: jax.Array) -> jax.Array:
  """bool `[6]`: pieces that may move for a die face index `die` (0..5).

  `pos_row` int32 `[6]` is one side's piece squares (-1 = captured). The
  piece named by the die if alive, otherwise the nearest lower and the
  nearest higher alive piece.
  """
  idx = jnp.arange(NUM_PIECES)
  alive = pos_row >= 0
  exact = jnp.any(alive & (idx == die))
  lower = jnp.max(jnp.where(alive & (idx < die), idx, -1))
  higher = jnp.min(jnp.where(alive & (idx > die), idx, NUM_PIECES))
  return jnp.where(exact, idx == die, (idx == lower) | (idx == higher))


def position(
  black: Mapping[int, Tuple[int, int]],
  white: Mapping[int, Tuple[int, int]],
  to_move: int,
  die: Optional[int] = None,
) -> EinsteinState:
  """A hand-built race position (Python side, for tests and analysis).

  Args:
    black, white: piece number (1..6) -> (row, col) on the absolute board;
      missing pieces are captured.
    to_move: the player who moves next (0 black, 1 white).
    die: the rolled face 1..6, or None for the node before the roll.

  Raises:
    ValueError: a bad piece number, square, player or die, or two pieces on
      one square.
  """
  pos = -np.ones((2, NUM_PIECES), np.int32)
  used = {}
  for side, pieces in enumerate((black, white)):
    for piece, square in pieces.items():
      if piece not in range(1, NUM_PIECES + 1):
        raise ValueError(f"piece numbers are 1..6, got {piece!r}")
      row, col = square
      if not (0 <= row < SIZE and 0 <= col < SIZE):
        raise ValueError(f"square {square!r} is off the 5x5 board")
      if (row, col) in used:
        raise ValueError(f"two pieces on square {square!r}")
      used[(row, col)] = piece
      pos[side, piece - 1] = SIZE * row + col
  if to_move not in (0, 1):
    raise ValueError(f"to_move must be 0 or 1, got {to_move!r}")
  if die is not None and die not in range(1, 7):
    raise ValueError(f"die must be a face 1..6 or None, got {die!r}")
  return EinsteinState(
    pos=jnp.asarray(pos),
    placed=jnp.int32(2),
    die=jnp.int32(-1 if die is None else die - 1),
    to_move=jnp.int32(to_move),
    winner=jnp.int32(-1),
  )


@register
class Einstein(Game):
  """EinStein würfelt nicht! See the module docstring for rules and encodings."""

  name = "einstein"
  version = 1
  payoff = "zero_sum"
  default_params = {"placement": "random"}

  @classmethod
  def validate_params(cls, params):
    if params["placement"] not in PLACEMENTS:
      raise ValueError(
        f"einstein: placement must be one of {PLACEMENTS}, got {params['placement']!r}"
      )

  @property
  def placement(self) -> str:
    return self.params["placement"]

  num_players = 2
  num_actions = NUM_ACTIONS
  chance_run_exact = True  # a roll always leaves a piece to move

  @property
  def max_chance_run(self) -> int:
    # The die before each move (after the first placement node, the second
    # placement and the die follow).
    return 2 if self.placement == "chance" else 1

  @property
  def max_initial_chance_run(self) -> int:
    return 3 if self.placement == "chance" else 1

  @property
  def max_legal_actions(self) -> int:
    """Two selectable pieces (the die's, or the nearest above and below it)
    with three moves each."""
    return 6

  @property
  def num_chance_outcomes(self) -> int:
    return NUM_PLACEMENTS if self.placement == "chance" else 6

  @property
  def max_chance_outcomes(self) -> int:
    """After the layouts every chance node is a die roll."""
    return 6

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return (SIZE, SIZE, NUM_PLANES)

  @property
  def max_game_length(self) -> int:
    # At most 40 moves a side, each after a roll, plus the placement nodes.
    return 4 * 40 + (2 if self.placement == "chance" else 0)

  def init(self, key: jax.Array) -> EinsteinState:
    if self.placement == "chance":
      pos = -jnp.ones((2, NUM_PIECES), jnp.int32)
      placed = 0
    else:
      if self.placement == "random":
        idx = jax.random.randint(key, (2,), 0, NUM_PLACEMENTS)
      else:
        idx = jnp.array(STANDARD_PLACEMENT)
      table = jnp.asarray(PLACEMENT_SQUARES)
      pos = jnp.stack([table[0, idx[0]], table[1, idx[1]]])
      placed = 2
    return EinsteinState(
      pos=pos,
      placed=jnp.int32(placed),
      die=jnp.int32(-1),
      to_move=jnp.int32(1),
      winner=jnp.int32(-1),
    )

  def current_player(self, g: EinsteinState) -> jax.Array:
    rolling = (g.placed < 2) | (g.die < 0)
    return jnp.where(g.winner >= 0, TERMINAL, jnp.where(rolling, CHANCE, g.to_move)).astype(
      jnp.int32
    )

  def perspective(self, g: EinsteinState) -> jax.Array:
    return g.to_move

  def _mover_view(self, g: EinsteinState) -> Tuple[jax.Array, jax.Array]:
    """The mover's pieces in their view, int32 `[6]`, and which may move."""
    mine = jnp.where(g.to_move == 0, g.pos[0], g.pos[1])
    return view_squares(mine, g.to_move), selectable(mine, g.die)

  def legal_action_mask(self, g: EinsteinState) -> jax.Array:
    src, movable = self._mover_view(g)
    # The squares (in the mover's view) of the pieces that may move, -1 for
    # the others. Not materialized here: `apply_action` materializes the
    # squares it moves to (a product here cost 5 % of the keyed loop).
    active = jnp.where(movable, src, -1)
    on = jnp.any(jnp.arange(NUM_SQUARES)[:, None] == active, axis=1)
    return (on[:, None] & jnp.asarray(_INSIDE)).reshape(NUM_ACTIONS)

  def chance_probs(self, g: EinsteinState) -> jax.Array:
    die = jnp.full((6,), 1.0 / 6, jnp.float32)
    if self.placement != "chance":
      return die
    die = jnp.pad(die, (0, NUM_PLACEMENTS - 6))
    place = jnp.full((NUM_PLACEMENTS,), 1.0 / NUM_PLACEMENTS, jnp.float32)
    return jnp.where(g.placed < 2, place, die)

  def apply_chance(self, g: EinsteinState, outcome: jax.Array):
    outcome = outcome.astype(jnp.int32)
    rewards = jnp.zeros((2,), jnp.float32)
    rolled = g.replace(die=jnp.clip(outcome, 0, 5))
    if self.placement != "chance":
      return rolled, rewards
    side = jnp.clip(g.placed, 0, 1)
    squares = jnp.asarray(PLACEMENT_SQUARES)[side, jnp.clip(outcome, 0, NUM_PLACEMENTS - 1)]
    pos = jnp.where(jnp.arange(2)[:, None] == side, squares[None], g.pos)
    placing = g.replace(pos=pos, placed=g.placed + 1)
    g = jax.tree.map(lambda a, b: jnp.where(g.placed < 2, a, b), placing, rolled)
    return g, rewards

  def apply_action(self, g: EinsteinState, action: jax.Array):
    p = g.to_move
    src_view = action // 3
    tgt_view = src_view + jnp.asarray(_STEP)[action % 3]
    src = view_squares(src_view, p)
    tgt = view_squares(tgt_view, p)
    mover_row = jnp.arange(2)[:, None] == p
    moving = mover_row & (g.pos == src)
    pos = jnp.where(g.pos == tgt, -1, g.pos)  # capture, own pieces included
    pos = jnp.where(moving, tgt, pos)
    # The new squares feed the mask, the observation and the die logic:
    # compute them once per game, not again inside each of those loops.
    pos = materialize(pos.astype(jnp.int8)).astype(jnp.int32)
    enemy_left = jnp.any((pos >= 0) & ~mover_row)
    won = (tgt_view == NUM_SQUARES - 1) | ~enemy_left
    winner = jnp.where(won, p, -1).astype(jnp.int32)
    sign = jnp.where(jnp.arange(2) == p, 1.0, -1.0)
    rewards = jnp.where(won, sign, 0.0).astype(jnp.float32)
    g = g.replace(pos=pos, die=jnp.int32(-1), to_move=(1 - p).astype(jnp.int32), winner=winner)
    return g, rewards

  def observe(self, g: EinsteinState, player: jax.Array) -> jax.Array:
    player = jnp.asarray(player, jnp.int32)
    mine = jnp.where(player == 0, g.pos[0], g.pos[1])
    theirs = jnp.where(player == 0, g.pos[1], g.pos[0])
    movable = jnp.where(player == g.to_move, selectable(mine, g.die), False)
    movable = movable & (g.die >= 0) & (mine >= 0)
    # Per channel, the square it marks (pieces; -1 none) and whether it is a
    # constant plane (the die face), so that the [25, 19] observation is one
    # broadcast compare, not a concatenation along its short last axis.
    squares = view_squares(jnp.concatenate([mine, theirs]), player)  # [12]
    marks = jnp.concatenate([squares, -jnp.ones((NUM_PLANES - 12,), jnp.int32)])
    full = jnp.concatenate([jnp.zeros((12,), bool), jnp.arange(6) == g.die, jnp.zeros((1,), bool)])
    movable_sq = jnp.where(movable, squares[:NUM_PIECES], -1)
    # Squares fit int8: one float each in `materialize`'s product, not two
    # (45 columns instead of 70: 1.3x the keyed random-play loop).
    marks, full, movable_sq = materialize(
      (marks.astype(jnp.int8), full, movable_sq.astype(jnp.int8))
    )
    marks, movable_sq = marks.astype(jnp.int32), movable_sq.astype(jnp.int32)
    sq = jnp.arange(NUM_SQUARES)[:, None]
    on_movable = jnp.any(sq == movable_sq, axis=1, keepdims=True)  # [25, 1]
    last = jnp.arange(NUM_PLANES) == NUM_PLANES - 1
    planes = (sq == marks) | full | (on_movable & last)
    return planes.astype(jnp.float32).reshape(SIZE, SIZE, NUM_PLANES)

  def render(self, g: EinsteinState) -> str:
    pos = np.asarray(g.pos)
    cells = [[" ." for _ in range(SIZE)] for _ in range(SIZE)]
    for side, mark in ((0, "b"), (1, "w")):
      for k in range(NUM_PIECES):
        if pos[side, k] >= 0:
          r, c = divmod(int(pos[side, k]), SIZE)
          cells[r][c] = f"{mark}{k + 1}"
    lines = ["    " + "  ".join(str(c) for c in range(SIZE))]
    lines += [f"{r}  " + " ".join(cells[r]) for r in range(SIZE)]
    colour = ("black b", "white w")
    if int(g.winner) >= 0:
      status = f"player {int(g.winner)} ({colour[int(g.winner)]}) has won"
    elif int(g.placed) < 2:
      status = f"placing player {int(g.placed)}'s pieces (chance)"
    else:
      p = int(g.to_move)
      die = f"die {int(g.die) + 1}" if int(g.die) >= 0 else "die not rolled"
      status = f"player {p} ({colour[p]}) to move, {die}"
    return "\n".join(lines + [status])

  def action_to_string(self, g: EinsteinState, action: int) -> str:
    """E.g. "w3-up (4, 2)->(3, 2)": piece, OpenSpiel's direction word, squares."""
    if not 0 <= action < NUM_ACTIONS:
      return str(action)
    p = int(g.to_move)
    src_view, d = divmod(action, 3)
    tgt_view = src_view + int(_STEP[d])
    src, tgt = (
      (src_view, tgt_view) if p == 0 else (NUM_SQUARES - 1 - src_view, NUM_SQUARES - 1 - tgt_view)
    )
    mine = np.asarray(g.pos)[p]
    piece = [k + 1 for k in range(NUM_PIECES) if mine[k] == src]
    name = f"{'bw'[p]}{piece[0] if piece else '?'}"
    words = (("diag", "down", "right"), ("diag", "up", "left"))[p]
    return f"{name}-{words[d]} {divmod(src, SIZE)}->{divmod(tgt, SIZE)}"


def to_openspiel_action(g: EinsteinState, action: jax.Array) -> jax.Array:
  """int32 `[]`: OpenSpiel's id of our `action` in decision state `g`.

  OpenSpiel ranks (row, col, direction, capture) in mixed base (5, 5, 6, 2) on
  the absolute board; capture is 1 when the target square is occupied.
  """
  p = g.to_move
  src_view = action // 3
  d = action % 3
  src = view_squares(src_view, p)
  tgt = view_squares(src_view + jnp.asarray(_STEP)[d], p)
  capture = jnp.any(g.pos == tgt).astype(jnp.int32)
  direction = jnp.asarray(_OS_DIR)[p, d]
  return ((src * 6 + direction) * 2 + capture).astype(jnp.int32)


def from_openspiel_action(g: EinsteinState, os_action: jax.Array) -> jax.Array:
  """int32 `[]`: our action for OpenSpiel's `os_action` in state `g` (the
  inverse of `to_openspiel_action` on legal actions)."""
  del g  # the mover is implied by OpenSpiel's direction
  square = os_action // 12
  direction = (os_action // 2) % 6
  p = (direction >= 3).astype(jnp.int32)
  d = jnp.argmax(jnp.asarray(_OS_DIR)[p] == direction)
  return (3 * view_squares(square, p) + d).astype(jnp.int32)
