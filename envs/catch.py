"""Catch (thesis `002`, V-A 1; bsuite/OpenSpiel `catch`).

A ball falls from the top row of a `rows x columns` grid, one row per step;
the paddle on the bottom row moves left, stays or moves right. The ball's
column is chosen by chance (uniformly) at the start. When the ball reaches the
bottom row the game ends with +1 if the paddle is under it, else -1.

Actions: 0 left, 1 stay, 2 right. Chance outcomes: the ball's column.
Observation: float32 `[rows, columns, 1]`, 1 at the ball and the paddle.
"""

from __future__ import annotations

from typing import Tuple

import jax
import jax.numpy as jnp
from flax import struct

from envs.core import CHANCE, TERMINAL, Game
from envs.registry import register


@struct.dataclass
class CatchState:
  """ball_row, ball_col, paddle_col: int32 `[]`; started: bool `[]`
  (False until chance has placed the ball)."""

  ball_row: jax.Array
  ball_col: jax.Array
  paddle_col: jax.Array
  started: jax.Array


@register
class Catch(Game):
  name = "catch"
  version = 1
  payoff = "single"
  default_params = {"rows": 10, "columns": 5}

  @classmethod
  def validate_params(cls, params):
    if params["rows"] < 2:
      raise ValueError(f"catch: rows must be >= 2, got {params['rows']}")
    if params["columns"] < 1:
      raise ValueError(f"catch: columns must be >= 1, got {params['columns']}")

  @property
  def rows(self) -> int:
    return self.params["rows"]

  @property
  def columns(self) -> int:
    return self.params["columns"]

  num_players = 1
  num_actions = 3
  max_chance_run = 0  # chance acts only at the start: the ball's drop
  max_initial_chance_run = 1
  chance_run_exact = True
  materialize_state = False  # its mask and observation are cheap (see Game)

  @property
  def num_chance_outcomes(self) -> int:
    return self.columns

  @property
  def max_chance_outcomes(self) -> int:
    return 1  # no chance node follows a decision (a bound of at least 1)

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return (self.rows, self.columns, 1)

  @property
  def max_game_length(self) -> int:
    return self.rows  # one chance step + rows - 1 moves

  def init(self, key: jax.Array) -> CatchState:
    del key  # the start is a chance node
    return CatchState(
      ball_row=jnp.int32(0),
      ball_col=jnp.int32(0),
      paddle_col=jnp.int32(self.columns // 2),
      started=jnp.bool_(False),
    )

  def _over(self, g: CatchState) -> jax.Array:
    return g.ball_row >= self.rows - 1

  def current_player(self, g: CatchState) -> jax.Array:
    return jnp.where(~g.started, CHANCE, jnp.where(self._over(g), TERMINAL, 0)).astype(jnp.int32)

  def legal_action_mask(self, g: CatchState) -> jax.Array:
    return jnp.ones((3,), jnp.bool_)

  def chance_probs(self, g: CatchState) -> jax.Array:
    return jnp.full((self.columns,), 1.0 / self.columns, jnp.float32)

  def apply_chance(self, g: CatchState, outcome: jax.Array):
    return g.replace(ball_col=outcome.astype(jnp.int32), started=jnp.bool_(True)), jnp.zeros(
      (1,), jnp.float32
    )

  def apply_action(self, g: CatchState, action: jax.Array):
    paddle = jnp.clip(g.paddle_col + action - 1, 0, self.columns - 1)
    g = g.replace(ball_row=g.ball_row + 1, paddle_col=paddle.astype(jnp.int32))
    caught = g.ball_col == g.paddle_col
    reward = jnp.where(self._over(g), jnp.where(caught, 1.0, -1.0), 0.0)
    return g, reward.reshape((1,)).astype(jnp.float32)

  def observe(self, g: CatchState, player: jax.Array) -> jax.Array:
    del player
    # One-hot outer products rather than scatters: much faster under vmap.
    rows = jnp.arange(self.rows)
    cols = jnp.arange(self.columns)
    ball = (rows == g.ball_row)[:, None] & (cols == g.ball_col)[None, :] & g.started
    paddle = (rows == self.rows - 1)[:, None] & (cols == g.paddle_col)[None, :]
    return (ball | paddle).astype(jnp.float32)[..., None]

  def render(self, g: CatchState) -> str:
    lines = []
    for r in range(self.rows):
      row = ""
      for c in range(self.columns):
        if bool(g.started) and r == int(g.ball_row) and c == int(g.ball_col):
          row += "o"
        elif r == self.rows - 1 and c == int(g.paddle_col):
          row += "="
        else:
          row += "."
      lines.append(row)
    if not bool(g.started):
      lines.insert(0, "(ball not yet dropped)")
    return "\n".join(lines)

  def action_to_string(self, g, action: int) -> str:
    return ("left", "stay", "right")[action] if 0 <= action < 3 else str(action)
