"""Games whose chance hides inside a keyed transition (gymnax, pgx's
backgammon and 2048): the shared game base and `Env`.

Such a game has no chance nodes: its transition draws its randomness from a
PRNG key. The game state carries that key (`KeyedState.key`, seeded by
`init`, split at every transition), so `Env.step(state, action)` is defined
and deterministic for a given state, as self-play and the match loop need;
`HiddenChanceEnv.step(state, action, key)` draws with the caller's `key`
instead. The explicit-chance entry points (`sample_chance`, a chance outcome
as an action, `Game.apply_chance`) do not apply and raise.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from envs.core import TERMINAL, Env, Game, State, single_key

_EXTRA = {"gymnax": "gymnax", "pgx": "pgx"}


def require(module: str):
  """Imports an optional dependency or raises an ImportError naming the extra."""
  try:
    return importlib.import_module(module)
  except ImportError as e:
    extra = _EXTRA.get(module.split(".")[0], module)
    raise ImportError(
      f"this adapter needs {module!r}: install anakin-mz[{extra}] (pip install -e '.[{extra}]')"
    ) from e


@struct.dataclass
class KeyedState:
  """The game state of a hidden-chance game.

  Attributes:
    inner: the wrapped library's state pytree.
    key: the PRNG key of the next transition (`[2]` uint32).
    terminated: bool `[]`, ended by the wrapped game's rules.
  """

  inner: Any
  key: jax.Array
  terminated: jax.Array


class KeyedGame(Game):
  """Base of the adapted games: no chance nodes; subclasses implement
  `keyed_init(key) -> inner` and `keyed_step(inner, action, key) -> (inner',
  rewards, terminated)`."""

  max_chance_run = 0
  chance_run_exact = True  # so `Env` never traces `apply_chance`
  hidden_chance = True  # the transition draws chance from a key
  adapted = True  # wrapped from another library (`envs.registered(adapted=False)`)

  @property
  def num_chance_outcomes(self) -> int:
    return 1

  def keyed_init(self, key: jax.Array):
    raise NotImplementedError

  def keyed_step(self, inner, action: jax.Array, key: Optional[jax.Array]):
    raise NotImplementedError

  def init(self, key: jax.Array) -> KeyedState:
    k_init, k_next = jax.random.split(key)
    inner, terminated = self.keyed_init(k_init)
    return KeyedState(inner=inner, key=k_next, terminated=jnp.asarray(terminated, jnp.bool_))

  def apply_action(self, g: KeyedState, action: jax.Array):
    if self.hidden_chance:
      k_step, k_next = jax.random.split(g.key)
    else:
      k_step, k_next = None, g.key
    inner, rewards, terminated = self.keyed_step(g.inner, action, k_step)
    g = KeyedState(inner=inner, key=k_next, terminated=jnp.asarray(terminated, jnp.bool_))
    return g, rewards.astype(jnp.float32)

  def chance_probs(self, g: KeyedState) -> jax.Array:
    del g
    return jnp.zeros((1,), jnp.float32)

  def apply_chance(self, g, outcome):
    raise ValueError(
      f"{self.name}: chance is hidden inside the keyed transition; there are no chance "
      "nodes and no chance outcomes to apply; use env.step(state, action, key)"
    )


class HiddenChanceEnv(Env):
  """`Env` for a `KeyedGame` with hidden chance: `step(state, action, key)`
  draws the transition's chance with `key`; `step(state, action)` with the
  key the state carries."""

  hidden_chance = True

  def step(self, state: State, action: jax.Array, key: Optional[jax.Array] = None) -> State:
    if key is not None:
      # A done state stays bit for bit as it was (absorbing).
      carried = jnp.where(state.done, state.game.key, single_key(key, "step", self.id))
      state = state.replace(game=state.game.replace(key=carried))
    return super().step(state, action)

  def sample_chance(self, state: State, key: jax.Array) -> State:
    raise ValueError(
      f"{self.id}: chance is hidden inside the keyed step (there are no chance nodes to "
      "sample); use env.step(state, action, key)"
    )


def keyed_player(g: KeyedState, player: jax.Array) -> jax.Array:
  """int32 `[]`: `player`, or `TERMINAL` once the wrapped game ended."""
  return jnp.where(g.terminated, TERMINAL, player).astype(jnp.int32)


def render_array(obs) -> str:
  """Text of an observation: planes `[H, W, C]` as a grid of the first set
  channel (`.` for none, `0-9a-z` for channels), anything else as numbers."""
  obs = np.asarray(obs)
  if obs.ndim == 3:
    marks = "0123456789abcdefghijklmnopqrstuvwxyz"
    rows = []
    for row in obs:
      cells = []
      for cell in row:
        on = np.flatnonzero(cell)
        cells.append(marks[on[0] % len(marks)] if on.size else ".")
      rows.append("".join(cells))
    return "\n".join(rows)
  return np.array2string(obs, precision=3, threshold=200)
