"""Breakthrough (thesis `004`, section 5.7; OpenSpiel `breakthrough`).

Two players on a `rows x columns` board. Player 0 (black, "b") starts on the
top row(s) and moves down (row index +1); player 1 (white, "w") starts on the
bottom row(s) and moves up. As in OpenSpiel, each side starts with two full
rows when `rows >= 6` and with one full row otherwise (so the default 5x5 board
of the thesis has five pieces a side). A piece moves one step straight or
diagonally forward onto an empty square, or captures an opposing piece
diagonally forward (never straight). A side wins by moving a piece onto the far
row or by capturing every opposing piece; there are no draws and a side always
has a move (its most advanced piece can move diagonally when `columns >= 2`).
Rewards are +1/-1 on the last move, zero otherwise. Chance never acts.

Everything an agent sees is canonical, i.e. relative to the mover: the
*mover's frame* of the board is the board as it is for black and the board
turned by 180 degrees for white (`(row, col) -> (rows-1-row, columns-1-col)`,
`view_squares`), so in its own frame every player starts on rows 0.. and moves
toward increasing row index. The turn is a rotation, not a mirror image, so
both sides see the same geometry: a position and its colour-swapped, turned
copy with the other side to move look identical and have the same actions.

Actions (`num_actions = rows * columns * 3`, 75 at 5x5, 192 at 8x8):
`action = (row * columns + col) * 3 + d`, with `(row, col)` the square the
piece leaves in the mover's frame and `d` 0, 1, 2 the step forward-left
`(+1, -1)`, forward `(+1, 0)`, forward-right `(+1, +1)` in that frame. Whether
a diagonal step captures follows from the position (no capture bit).
`to_openspiel_action` / `from_openspiel_action` give the bijection, on legal
actions, with OpenSpiel's ids `((row * columns + col) * 6 + direction) * 2 +
capture` on the absolute board (directions 0..2 black's `(+1, -1), (+1, 0),
(+1, +1)`, 3..5 white's `(-1, -1), (-1, 0), (-1, +1)`); `action_to_string`
gives OpenSpiel's move names ("a5a4", "b4c3*").

Observation: float32 `[rows, columns, 3]` in the frame of `player` (for the
state's own observation, the mover; at the end, the winner): plane 0 the
player's pieces, plane 1 the opponent's, plane 2 the empty squares. There is
no colour plane: both sides play the same game. For black these are
OpenSpiel's observation planes (black, white, empty) moved to channels-last;
for white OpenSpiel's planes (white, black, empty) turned by 180 degrees.

The game core's state keeps the absolute board (`render` draws it as OpenSpiel
prints it, black's home row on top).
"""

from __future__ import annotations

from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.core import TERMINAL, Game
from envs.fusion import materialize
from envs.registry import register

EMPTY, BLACK, WHITE = 0, 1, 2  # cell values; player p's pieces are p + 1
NUM_MOVES = 3  # forward-left, forward, forward-right (mover's frame)
MOVE_COL = (-1, 0, 1)  # column step of each move in the mover's frame
MAX_SIDE = 16
# OpenSpiel starts with two full rows a side from this many rows on.
ROWS_FOR_TWO_ROWS = 6
# OpenSpiel's absolute direction of our move d, per player (its directions
# 0..2 are black's (+1, -1), (+1, 0), (+1, +1); 3..5 white's (-1, -1),
# (-1, 0), (-1, +1); turning the board maps white's (+1, dc) to (-1, -dc)).
_OS_DIRECTION = ((0, 1, 2), (5, 4, 3))


@struct.dataclass
class BreakthroughState:
  """board: int8 `[rows, columns]`, absolute (EMPTY, BLACK or WHITE; row 0 is
  black's home row); player: int32 `[]` to move (0 black, 1 white); winner:
  int32 `[]`, -1 while the game goes on."""

  board: jax.Array
  player: jax.Array
  winner: jax.Array


def view_squares(sq: jax.Array, player: jax.Array, num_squares: int) -> jax.Array:
  """Maps flat squares (`row * columns + col`) of the absolute board to
  `player`'s frame (turned 180 degrees for player 1) and back: the map is its
  own inverse. Any shape."""
  return jnp.where(player == 0, sq, num_squares - 1 - sq)


def view_board(board: jax.Array, player: jax.Array) -> jax.Array:
  """The board `[rows, columns]` (or flat) in `player`'s frame: as it is for
  player 0, turned 180 degrees for player 1 (cell values unchanged)."""
  return jnp.where(player == 0, board, jnp.flip(board))


def action_tables(rows: int, columns: int) -> dict:
  """Static numpy tables over all `rows * columns * 3` actions, in the
  mover's frame (the same for both players).

  Returns a dict of arrays `[num_actions]`: `src` and `dst` flat squares of
  the frame (`dst` clipped to 0 where off the board), `on_board` bool,
  `straight` bool (the forward move, which never captures).
  """
  a = np.arange(rows * columns * NUM_MOVES)
  d = a % NUM_MOVES
  square = a // NUM_MOVES
  r, c = square // columns, square % columns
  r2, c2 = r + 1, c + np.asarray(MOVE_COL)[d]
  on_board = (r2 < rows) & (c2 >= 0) & (c2 < columns)
  dst = np.where(on_board, r2 * columns + c2, 0)
  return dict(
    src=square.astype(np.int32), dst=dst.astype(np.int32), on_board=on_board, straight=d == 1
  )


@register
class Breakthrough(Game):
  """Breakthrough. See the module docstring for rules and encodings."""

  name = "breakthrough"
  version = 2  # 2: canonical (mover's frame) actions and observation
  payoff = "zero_sum"
  default_params = {"rows": 5, "columns": 5}

  num_players = 2
  num_chance_outcomes = 1
  max_chance_run = 0  # chance never acts
  chance_run_exact = True
  materialize_state = False  # its mask and observation are cheap (see Game)

  @classmethod
  def validate_params(cls, params):
    for key in ("rows", "columns"):
      if not 2 <= params[key] <= MAX_SIDE:
        raise ValueError(f"breakthrough: {key} must be in 2..{MAX_SIDE}, got {params[key]}")

  def __init__(self, **params):
    super().__init__(**params)
    t = action_tables(self.rows, self.columns)
    self._src = jnp.asarray(t["src"])
    self._dst = jnp.asarray(t["dst"])
    self._dst_row = jnp.asarray(t["dst"] // self.columns)
    self._on_board = t["on_board"]  # numpy: read by action_to_string
    self._straight = t["straight"]

  @property
  def rows(self) -> int:
    return self.params["rows"]

  @property
  def columns(self) -> int:
    return self.params["columns"]

  @property
  def num_actions(self) -> int:
    return self.rows * self.columns * NUM_MOVES

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return (self.rows, self.columns, 3)

  @property
  def max_game_length(self) -> int:
    # OpenSpiel's bound: every move advances a piece one row.
    return 2 * (2 * self.rows - 3) * self.columns + 1

  @property
  def pieces_per_side(self) -> int:
    """Pieces each side starts with."""
    return self.columns * (2 if self.rows >= ROWS_FOR_TWO_ROWS else 1)

  @property
  def max_legal_actions(self) -> int:
    """A bound on the legal actions of a position: three per piece."""
    return NUM_MOVES * self.pieces_per_side

  def initial_board(self) -> np.ndarray:
    """int8 `[rows, columns]`: the starting position (absolute board)."""
    board = np.zeros((self.rows, self.columns), np.int8)
    home = 2 if self.rows >= ROWS_FOR_TWO_ROWS else 1
    board[:home] = BLACK
    board[self.rows - home :] = WHITE
    return board

  def from_board(self, board, player: int) -> BreakthroughState:
    """A state from an absolute `[rows, columns]` board of EMPTY/BLACK/WHITE
    with `player` to move (for hand-built positions; the winner is not
    inferred)."""
    board = np.asarray(board, np.int8)
    if board.shape != (self.rows, self.columns):
      raise ValueError(f"breakthrough: board shape {board.shape} != {(self.rows, self.columns)}")
    if player not in (0, 1):
      raise ValueError(f"breakthrough: player must be 0 or 1, got {player}")
    return BreakthroughState(
      board=jnp.asarray(board), player=jnp.int32(player), winner=jnp.int32(-1)
    )

  def init(self, key: jax.Array) -> BreakthroughState:
    del key  # the start is fixed
    return self.from_board(self.initial_board(), 0)

  def current_player(self, g: BreakthroughState) -> jax.Array:
    return jnp.where(g.winner >= 0, TERMINAL, g.player).astype(jnp.int32)

  def legal_action_mask(self, g: BreakthroughState) -> jax.Array:
    # Static move tables: the source and target square of every action in
    # the mover's frame, read from the flat board (a gather with constant
    # indices, not shifted boards stacked along the short last axis).
    board, me = materialize(
      (view_board(g.board, g.player).reshape(-1), (g.player + 1).astype(jnp.int8))
    )
    target = board[self._dst]
    onto = jnp.where(self._straight, target == EMPTY, target != me)
    return (board[self._src] == me) & onto & self._on_board

  def chance_probs(self, g: BreakthroughState) -> jax.Array:
    return jnp.ones((1,), jnp.float32)

  def apply_chance(self, g: BreakthroughState, outcome: jax.Array):
    del outcome  # never reached: chance never acts
    return g, jnp.zeros((2,), jnp.float32)

  def apply_action(self, g: BreakthroughState, action: jax.Array):
    n = self.rows * self.columns
    me = (g.player + 1).astype(jnp.int8)
    opp = (2 - g.player).astype(jnp.int8)
    src = view_squares(self._src[action], g.player, n)
    dst = view_squares(self._dst[action], g.player, n)
    board = g.board.reshape(-1).at[dst].set(me).at[src].set(EMPTY)
    wins = (self._dst_row[action] == self.rows - 1) | ~jnp.any(board == opp)
    winner = jnp.where(wins, g.player, -1).astype(jnp.int32)
    sign = jnp.where(g.player == 0, 1.0, -1.0)
    rewards = jnp.where(wins, jnp.stack([sign, -sign]), 0.0)
    return (
      BreakthroughState(
        board=board.reshape(self.rows, self.columns), player=1 - g.player, winner=winner
      ),
      rewards.astype(jnp.float32),
    )

  def observe(self, g: BreakthroughState, player: jax.Array) -> jax.Array:
    player = jnp.asarray(player, jnp.int32)
    # One broadcast compare against the three plane codes (no stacking
    # along the short last axis), on a board computed once per game.
    board, codes = materialize(
      (view_board(g.board, player), jnp.stack([player + 1, 2 - player, jnp.int32(EMPTY)]))
    )
    return (board[..., None] == codes.astype(jnp.int8)).astype(jnp.float32)

  def perspective(self, g: BreakthroughState) -> jax.Array:
    # At the end, the side that made the last move.
    return jnp.where(g.winner >= 0, g.winner, g.player).astype(jnp.int32)

  def render(self, g: BreakthroughState) -> str:
    board = np.asarray(g.board).reshape(self.rows, self.columns)
    lines = [f"{self.rows - r:>2} " + "".join(".bw"[v] for v in board[r]) for r in range(self.rows)]
    lines.append("   " + "".join(chr(ord("a") + c) for c in range(self.columns)))
    winner = int(g.winner)
    if winner >= 0:
      lines.append(f"{('black', 'white')[winner]} (player {winner}) won")
    else:
      player = int(g.player)
      lines.append(f"{('black', 'white')[player]} (player {player}) to move")
    return "\n".join(lines)

  def action_to_string(self, g: BreakthroughState, action: int) -> str:
    """OpenSpiel's name of `action` for the mover of `g`, e.g. "a5a4" or
    "b4c3*" (absolute squares, ranks counting from the bottom; "*" when the
    step captures). `str(action)` for an id that leaves the board."""
    rows, cols = self.rows, self.columns
    if not (0 <= action < self.num_actions and self._on_board[action]):
      return str(action)
    src, dst, capture = (int(x) for x in _absolute_move(g, action))
    (r, c), (r2, c2) = divmod(src, cols), divmod(dst, cols)
    name = f"{chr(ord('a') + c)}{rows - r}{chr(ord('a') + c2)}{rows - r2}"
    return name + ("*" if capture else "")


def _absolute_move(g: BreakthroughState, action: jax.Array):
  """(src, dst, capture) of our `action` in `g`: flat squares of the absolute
  board (`dst` clipped onto the board for ids that leave it) and whether the
  step takes an opposing piece. Meaningful for legal actions only."""
  rows, columns = g.board.shape
  n = rows * columns
  p = g.player
  action = jnp.asarray(action, jnp.int32)
  d = action % NUM_MOVES
  view_src = action // NUM_MOVES
  view_dst = view_src + columns + jnp.asarray(MOVE_COL)[d]
  src = view_squares(view_src, p, n)
  dst = jnp.clip(view_squares(view_dst, p, n), 0, n - 1)
  capture = (d != 1) & (g.board.reshape(-1)[dst] == 2 - p)
  return src, dst, capture


def to_openspiel_action(g: BreakthroughState, action: jax.Array) -> jax.Array:
  """int32 `[]`: OpenSpiel's id of our `action` in decision state `g` (one
  unbatched state; vmap for batches).

  OpenSpiel ranks (row, col, direction, capture) in mixed base (rows,
  columns, 6, 2) on the absolute board; capture is 1 when the target square
  holds an opposing piece. Meaningful for legal actions only.
  """
  action = jnp.asarray(action, jnp.int32)
  src, _, capture = _absolute_move(g, action)
  direction = jnp.asarray(_OS_DIRECTION)[g.player, action % NUM_MOVES]
  return ((src * 6 + direction) * 2 + capture.astype(jnp.int32)).astype(jnp.int32)


def from_openspiel_action(g: BreakthroughState, os_action: jax.Array) -> jax.Array:
  """int32 `[]`: our action for OpenSpiel's `os_action` in state `g` (one
  unbatched state; the inverse of `to_openspiel_action` on legal actions).
  The mover is implied by OpenSpiel's direction; `g` gives the board size."""
  rows, columns = g.board.shape
  os_action = jnp.asarray(os_action, jnp.int32)
  square = os_action // 12
  direction = (os_action // 2) % 6
  p = (direction >= 3).astype(jnp.int32)
  d = jnp.where(p == 0, direction, 5 - direction)
  return (view_squares(square, p, rows * columns) * NUM_MOVES + d).astype(jnp.int32)
