"""Our games in pgx's API (`to_pgx`): a `pgx.Env` at decision nodes.

`init(key)` is our `reset(key)` and `step(state, action, key)` our keyed
step: chance nodes are drawn inside them (with the one inverse-CDF rule of
`envs.core`, as `envs.chance_outcome`), so a pgx user only sees decisions.
Games whose chance can act need the `key` (as pgx's backgammon does);
deterministic ones accept `key=None`. pgx's conventions hold: `current_player`
is never negative (at the end it keeps the last mover), the legal mask is all
True once terminated, and pgx's `Env.step` applies its own illegal-action
penalty (-1 for the mover, +1 shared by the others) and absorbing end.
`state.save_svg` writes the text board in an SVG.
"""

from __future__ import annotations

import html
from typing import Optional

import jax
import jax.numpy as jnp

from envs.adapters.hidden import require
from envs.core import Env


def _state_class(env: Env, pgx):
  """The pgx `State` subclass of one of our games (pgx reads `env_id` off
  the state class)."""
  env_id = env.id
  from pgx._src.struct import dataclass  # pylint: disable=import-outside-toplevel

  class _State(pgx.State):
    current_player: jax.Array = jnp.int32(0)
    observation: jax.Array = jnp.zeros((0,), jnp.float32)
    rewards: jax.Array = jnp.float32(0)
    terminated: jax.Array = jnp.bool_(False)
    truncated: jax.Array = jnp.bool_(False)
    legal_action_mask: jax.Array = jnp.zeros((0,), jnp.bool_)
    _step_count: jax.Array = jnp.int32(0)
    _inner: object = None  # our `envs.State`

    @property
    def env_id(self) -> str:
      return env_id

    def to_svg(self, *, color_theme=None, scale=None) -> str:
      del color_theme, scale
      if jnp.ndim(self.current_player) == 0:
        text = env.render(self._inner)
      else:  # a batch (pgx draws a grid): one board after another
        n = int(jnp.size(self.current_player))
        flat = jax.tree.map(
          lambda x: x.reshape((n,) + x.shape[self.current_player.ndim :]), self._inner
        )
        text = "\n\n".join(
          f"[{i}]\n" + env.render(jax.tree.map(lambda x: x[i], flat)) for i in range(n)
        )
      lines = text.splitlines() or [""]
      width = 10 + 9 * max(len(s) for s in lines)
      height = 10 + 16 * len(lines)
      body = "".join(
        f'<text x="5" y="{16 * (i + 1)}" font-family="monospace" font-size="14">'
        f"{html.escape(s)}</text>"
        for i, s in enumerate(lines)
      )
      return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">{body}</svg>'
      )

    def save_svg(self, filename, *, color_theme=None, scale=None) -> None:
      if not str(filename).endswith(".svg"):
        raise ValueError(f"save_svg writes an .svg file, got {filename!r}")
      with open(filename, "w", encoding="utf-8") as f:
        f.write(self.to_svg(color_theme=color_theme, scale=scale))

  _State.__name__ = _State.__qualname__ = f"State_{env_id}"
  return dataclass(_State)


def to_pgx(env: Env):
  """`env` (an `envs.Env`) as a `pgx.Env`. Raises ImportError without pgx."""
  pgx = require("pgx")
  if not isinstance(env, Env):
    raise TypeError(f"to_pgx takes an envs.Env (from envs.make), got {type(env).__name__}")
  env_id = env.id
  State = _state_class(env, pgx)
  # Chance after a move (chance at the start is drawn by `init`'s key).
  has_chance = env.hidden_chance or not (env.game.max_chance_run == 0 and env.game.chance_run_exact)

  def wrap(inner, prev_player, step_count) -> "State":
    done = inner.done
    player = jnp.where(inner.current_player >= 0, inner.current_player, prev_player)
    mask = jnp.where(done, True, inner.legal_action_mask)
    return State(
      current_player=player.astype(jnp.int32),
      observation=inner.observation,
      rewards=inner.rewards,
      terminated=inner.terminated,
      truncated=inner.truncated,
      legal_action_mask=mask,
      _step_count=jnp.asarray(step_count, jnp.int32),
      _inner=inner,
    )

  class PgxEnv(pgx.Env):
    """One of our games as a `pgx.Env` (see `envs/adapters/to_pgx.py`)."""

    # For `envs.from_pgx` (the round trip).
    max_game_length = env.max_game_length
    hidden_chance = has_chance
    payoff = env.payoff

    def _init(self, key):
      return wrap(env.reset(key), jnp.int32(0), 0)

    def step(self, state, action, key: Optional[jax.Array] = None):
      if key is None and has_chance:
        raise ValueError(
          f"{env_id} has chance, drawn inside step: call step(state, action, key) "
          "(as pgx's backgammon)"
        )
      return super().step(state, action, key)

    def _step(self, state, action, key):
      inner = env.step(state._inner, action, key)  # pylint: disable=protected-access
      return wrap(inner, state.current_player, state._step_count)  # pylint: disable=protected-access

    def _observe(self, state, player_id):
      return env.observe(state._inner, player_id)  # pylint: disable=protected-access

    @property
    def id(self):
      return env_id

    @property
    def version(self) -> str:
      return f"anakin-mz-{env.version}"

    @property
    def num_players(self) -> int:
      return env.num_players

  PgxEnv.__name__ = PgxEnv.__qualname__ = f"PgxEnv_{env_id}"
  return PgxEnv()
