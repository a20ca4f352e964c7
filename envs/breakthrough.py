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

Actions: exactly OpenSpiel's encoding,
`action = ((row * columns + column) * 6 + direction) * 2 + capture`, with
`(row, column)` the square the piece leaves, `direction` in 0..5 the step
`(+1,-1), (+1,0), (+1,+1)` (black) or `(-1,-1), (-1,0), (-1,+1)` (white), and
`capture` 1 for a capture. `num_actions = rows * columns * 12` (300 at 5x5,
768 at 8x8); most of these are never legal.

Observation: float32 `[rows, columns, 4]` in OpenSpiel's board orientation
(row 0 is black's home row, printed at the top), from the point of view of
`player`: plane 0 the player's pieces, plane 1 the opponent's pieces, plane 2
the empty squares, plane 3 all ones when `player` is black (moves down) and all
zeros when white. For player 0 planes 0-2 are OpenSpiel's observation tensor
`[3, rows, columns]` moved to channels-last; for player 1 its planes 0 and 1
are swapped. The board is not flipped, so actions keep one meaning.
"""

from __future__ import annotations

from typing import Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.core import TERMINAL, Game
from envs.registry import register

EMPTY, BLACK, WHITE = 0, 1, 2  # cell values; player p's pieces are p + 1
NUM_DIRECTIONS = 6
# Direction offsets for black (0..2), then white (3..5), as in OpenSpiel.
DIR_ROW = (1, 1, 1, -1, -1, -1)
DIR_COL = (-1, 0, 1, -1, 0, 1)
MAX_SIDE = 16
# OpenSpiel starts with two full rows a side from this many rows on.
ROWS_FOR_TWO_ROWS = 6


@struct.dataclass
class BreakthroughState:
  """board: int8 `[rows * columns]` row-major (EMPTY, BLACK or WHITE);
  player: int32 `[]` to move (0 black, 1 white); winner: int32 `[]`, -1 while
  the game goes on."""
  board: jax.Array
  player: jax.Array
  winner: jax.Array


def action_tables(rows: int, columns: int) -> dict:
  """Static numpy tables over all `rows * columns * 12` actions.

  Returns a dict of arrays `[num_actions]`: `src` and `dst` flat squares
  (`dst` clipped to 0 where off the board), `on_board` bool, `owner` (0 for
  black's directions, 1 for white's), `capture` bool, `straight` bool.
  """
  a = np.arange(rows * columns * NUM_DIRECTIONS * 2)
  capture = a % 2
  direction = (a // 2) % NUM_DIRECTIONS
  square = a // (2 * NUM_DIRECTIONS)
  r, c = square // columns, square % columns
  r2 = r + np.asarray(DIR_ROW)[direction]
  c2 = c + np.asarray(DIR_COL)[direction]
  on_board = (r2 >= 0) & (r2 < rows) & (c2 >= 0) & (c2 < columns)
  dst = np.where(on_board, r2 * columns + c2, 0)
  return dict(src=square.astype(np.int32), dst=dst.astype(np.int32),
              on_board=on_board, owner=(direction // 3).astype(np.int32),
              capture=capture.astype(bool), straight=(direction % 3) == 1)


@register
class Breakthrough(Game):
  name = "breakthrough"
  version = 1
  payoff = "zero_sum"
  default_params = {"rows": 5, "columns": 5}

  num_players = 2
  num_chance_outcomes = 1

  @classmethod
  def validate_params(cls, params):
    for key in ("rows", "columns"):
      if not 2 <= params[key] <= MAX_SIDE:
        raise ValueError(f"breakthrough: {key} must be in 2..{MAX_SIDE}, "
                         f"got {params[key]}")

  def __init__(self, **params):
    super().__init__(**params)
    t = action_tables(self.rows, self.columns)
    self._src = jnp.asarray(t["src"])
    self._dst = jnp.asarray(t["dst"])
    self._dst_row = jnp.asarray(t["dst"] // self.columns)

  @property
  def rows(self) -> int:
    return self.params["rows"]

  @property
  def columns(self) -> int:
    return self.params["columns"]

  @property
  def num_actions(self) -> int:
    return self.rows * self.columns * NUM_DIRECTIONS * 2

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return (self.rows, self.columns, 4)

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
    return 3 * self.pieces_per_side

  def initial_board(self) -> np.ndarray:
    """int8 `[rows, columns]`: the starting position."""
    board = np.zeros((self.rows, self.columns), np.int8)
    home = 2 if self.rows >= ROWS_FOR_TWO_ROWS else 1
    board[:home] = BLACK
    board[self.rows - home:] = WHITE
    return board

  def from_board(self, board, player: int) -> BreakthroughState:
    """A state from a `[rows, columns]` board of EMPTY/BLACK/WHITE with
    `player` to move (for hand-built positions; the winner is not inferred)."""
    board = np.asarray(board, np.int8)
    if board.shape != (self.rows, self.columns):
      raise ValueError(f"breakthrough: board shape {board.shape} != "
                       f"{(self.rows, self.columns)}")
    if player not in (0, 1):
      raise ValueError(f"breakthrough: player must be 0 or 1, got {player}")
    return BreakthroughState(board=jnp.asarray(board.reshape(-1)),
                             player=jnp.int32(player), winner=jnp.int32(-1))

  def init(self, key: jax.Array) -> BreakthroughState:
    del key  # the start is fixed
    return self.from_board(self.initial_board(), 0)

  def current_player(self, g: BreakthroughState) -> jax.Array:
    return jnp.where(g.winner >= 0, TERMINAL, g.player).astype(jnp.int32)

  def legal_action_mask(self, g: BreakthroughState) -> jax.Array:
    # Shifted boards, not a gather over all actions: several times faster.
    rows, cols = self.rows, self.columns
    board = g.board.reshape(rows, cols)
    mine = board == (g.player + 1).astype(jnp.int8)
    pad = lambda x: jnp.pad(x, 1)  # off the board reads as False
    empty = pad(board == EMPTY)
    opp = pad(board == (2 - g.player).astype(jnp.int8))
    planes = []
    for d in range(NUM_DIRECTIONS):
      dr, dc = DIR_ROW[d], DIR_COL[d]
      window = (slice(1 + dr, 1 + dr + rows), slice(1 + dc, 1 + dc + cols))
      mover = mine & (g.player == d // 3)
      planes.append(mover & empty[window])
      planes.append(mover & opp[window] if dc else jnp.zeros_like(mine))
    # [rows, columns, direction, capture], flattened in the action order.
    return jnp.stack(planes, axis=-1).reshape(-1)

  def chance_probs(self, g: BreakthroughState) -> jax.Array:
    return jnp.ones((1,), jnp.float32)

  def apply_chance(self, g: BreakthroughState, outcome: jax.Array):
    del outcome  # never reached: chance never acts
    return g, jnp.zeros((2,), jnp.float32)

  def apply_action(self, g: BreakthroughState, action: jax.Array):
    me = (g.player + 1).astype(jnp.int8)
    opp = (2 - g.player).astype(jnp.int8)
    dst = self._dst[action]
    board = g.board.at[dst].set(me).at[self._src[action]].set(EMPTY)
    far_row = jnp.where(g.player == 0, self.rows - 1, 0)
    wins = (self._dst_row[action] == far_row) | ~jnp.any(board == opp)
    winner = jnp.where(wins, g.player, -1).astype(jnp.int32)
    sign = jnp.where(g.player == 0, 1.0, -1.0)
    rewards = jnp.where(wins, jnp.stack([sign, -sign]), 0.0)
    return (BreakthroughState(board=board, player=1 - g.player, winner=winner),
            rewards.astype(jnp.float32))

  def observe(self, g: BreakthroughState, player: jax.Array) -> jax.Array:
    board = g.board.reshape(self.rows, self.columns)
    mine = board == (player + 1).astype(jnp.int8)
    theirs = board == (2 - player).astype(jnp.int8)
    black = jnp.broadcast_to(player == 0, board.shape)
    return jnp.stack([mine, theirs, board == EMPTY, black],
                     axis=-1).astype(jnp.float32)

  def perspective(self, g: BreakthroughState) -> jax.Array:
    # At the end, the side that made the last move.
    return jnp.where(g.winner >= 0, g.winner, g.player).astype(jnp.int32)

  def render(self, g: BreakthroughState) -> str:
    board = np.asarray(g.board).reshape(self.rows, self.columns)
    lines = [f"{self.rows - r:>2} " + "".join(".bw"[v] for v in board[r])
             for r in range(self.rows)]
    lines.append("   " + "".join(chr(ord("a") + c) for c in range(self.columns)))
    winner = int(g.winner)
    if winner >= 0:
      lines.append(f"{('black', 'white')[winner]} (player {winner}) won")
    else:
      player = int(g.player)
      lines.append(f"{('black', 'white')[player]} (player {player}) to move")
    return "\n".join(lines)

  def action_to_string(self, g, action: int) -> str:
    """OpenSpiel's name, e.g. "a5a4" or "b4c3*" (ranks count from the bottom)."""
    del g
    if not 0 <= action < self.num_actions:
      return str(action)
    square, rest = divmod(action, 2 * NUM_DIRECTIONS)
    direction, capture = divmod(rest, 2)
    r, c = divmod(square, self.columns)
    r2, c2 = r + DIR_ROW[direction], c + DIR_COL[direction]
    name = (f"{chr(ord('a') + c)}{self.rows - r}"
            f"{chr(ord('a') + c2)}{self.rows - r2}")
    return name + ("*" if capture else "")
