"""pgx games as `envs.Env` (`from_pgx`), registered as `pgx-<pgx id>`.

Turn order comes from pgx's `current_player` (pgx draws who starts from the
`init` key), rewards are pgx's per-player rewards, pgx's `terminated` (and
`truncated`) end the game, and the legal mask is pgx's. Illegal actions and
finished games follow our contract (`envs/core.py`), so pgx never sees them;
pgx's own illegal-move penalty (e.g. -3 in backgammon) is not used.

Games with hidden chance (backgammon's dice, 2048's tiles) draw it inside
pgx's keyed `step`: they are `HiddenChanceEnv`s (see `hidden.py`). What is
exposed: the legal mask, the turn order and the outcome once drawn (pgx puts
the dice in backgammon's observation and the new tile on 2048's board). What
is not: the chance node itself (its distribution and outcome index), since
pgx rolls and applies it in one step; an agent on these games learns chance
as part of the transition, as MuZero does.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import jax
import jax.numpy as jnp

from envs.adapters.hidden import HiddenChanceEnv, KeyedGame, keyed_player, render_array, require
from envs.core import Env
from envs.registry import build, register

# pgx ids whose `step` draws chance from its key.
HIDDEN_CHANCE = ("backgammon", "2048")

# Bounds on a game's length in transitions (`max_game_length`); a game not
# listed needs `max_game_length=` in `from_pgx`. Go ends itself at 2 * size^2
# moves; Othello has 60 placements and at most one pass between two.
MAX_GAME_LENGTH = {
  "tic_tac_toe": 9,
  "connect_four": 42,
  "othello": 128,
  "go_9x9": 162,
  "go_19x19": 722,
  "hex": 122,
  "animal_shogi": 256,
  "gardner_chess": 256,
  "backgammon": 2000,  # not bounded by the rules: truncated there
  "2048": 5000,  # not bounded by the rules (random play ends near 150)
}


class PgxGame(KeyedGame):
  """A pgx environment behind `envs.Game`. Subclasses set `pgx_id`,
  `hidden_chance`, `env_class` and `game_length`."""

  pgx_id: str = ""
  game_length: int = 0
  pgx_env = None  # a pgx.Env instance to wrap instead of `pgx.make(pgx_id)`

  def __init__(self, **params):
    super().__init__(**params)
    if self.pgx_env is not None:
      self._env = self.pgx_env
    else:
      pgx = require("pgx")
      self._env = pgx.make(self.pgx_id)
    state = jax.eval_shape(self._env.init, jax.random.PRNGKey(0))
    self._num_players = int(self._env.num_players)
    self._num_actions = int(state.legal_action_mask.shape[-1])
    self._obs_shape = tuple(state.observation.shape)

  @property
  def num_players(self) -> int:
    return self._num_players

  @property
  def num_actions(self) -> int:
    return self._num_actions

  @property
  def observation_shape(self):
    return self._obs_shape

  @property
  def max_game_length(self) -> int:
    return self.game_length

  def keyed_init(self, key):
    s = self._env.init(key)
    return s, s.terminated | s.truncated

  def keyed_step(self, inner, action, key):
    s = self._env.step(inner, action, key)
    return s, s.rewards, s.terminated | s.truncated

  def current_player(self, g):
    return keyed_player(g, g.inner.current_player)

  def legal_action_mask(self, g):
    return g.inner.legal_action_mask

  def observe(self, g, player):
    # pgx's public `observe(state, player_id)` warns that the argument is
    # deprecated; `_observe` is the same function without the warning.
    return self._env._observe(g.inner, player).astype(jnp.float32)  # pylint: disable=protected-access

  def render(self, g) -> str:
    return render_array(g.inner.observation)


_CLASSES: Dict[str, Type[PgxGame]] = {}


def _pgx_class(
  name: str, pgx_id: str, max_game_length: int, hidden: bool, payoff: str, pgx_env=None
) -> Type[PgxGame]:
  return type(
    f"Pgx_{pgx_id}",
    (PgxGame,),
    {
      "name": name,
      "pgx_id": pgx_id,
      "payoff": payoff,
      "game_length": max_game_length,
      "hidden_chance": hidden,
      "env_class": HiddenChanceEnv if hidden else Env,
      "pgx_env": pgx_env,
    },
  )


def from_pgx(name, max_game_length: Optional[int] = None) -> Env:
  """A pgx game (a pgx id such as "connect_four", or a `pgx.Env` instance)
  as an `envs.Env`. Two-player games are zero-sum, one-player games single.

  `max_game_length` bounds the transitions (the game is truncated there);
  it defaults to `MAX_GAME_LENGTH[name]`. Raises ValueError for an unknown
  id, ImportError if pgx is not installed.
  """
  if not isinstance(name, str):
    return _from_instance(name, max_game_length)
  pgx = require("pgx")
  ids = pgx.available_envs()
  if name not in ids:
    raise ValueError(f"unknown pgx env {name!r}; pgx envs: {', '.join(ids)}")
  if max_game_length is None:
    if name not in MAX_GAME_LENGTH:
      raise ValueError(
        f"pgx env {name!r} has no known length bound; pass max_game_length= "
        f"(known: {', '.join(MAX_GAME_LENGTH)})"
      )
    max_game_length = MAX_GAME_LENGTH[name]
  if max_game_length < 1:
    raise ValueError(f"max_game_length must be >= 1, got {max_game_length}")
  key = (name, max_game_length)
  if key not in _CLASSES:
    payoff = "single" if name == "2048" else "zero_sum"
    _CLASSES[key] = _pgx_class(f"pgx:{name}", name, max_game_length, name in HIDDEN_CHANCE, payoff)
  return build(_CLASSES[key], {})


def _from_instance(pgx_env, max_game_length: Optional[int]) -> Env:
  """A `pgx.Env` instance (e.g. one of `envs.to_pgx`) as an `envs.Env`."""
  if max_game_length is None:
    max_game_length = getattr(pgx_env, "max_game_length", None)
  if max_game_length is None:
    raise ValueError("from_pgx(pgx_env): pass max_game_length= (the env declares none)")
  hidden = bool(getattr(pgx_env, "hidden_chance", str(pgx_env.id) in HIDDEN_CHANCE))
  payoff = getattr(pgx_env, "payoff", "single" if pgx_env.num_players == 1 else "zero_sum")
  cls = _pgx_class(
    f"pgx:{pgx_env.id}", str(pgx_env.id), int(max_game_length), hidden, payoff, pgx_env
  )
  return build(cls, {})


# Registered pgx games: `pgx-<pgx id>`.
for _id in ("tic_tac_toe", "connect_four", "othello", "go_9x9", "backgammon", "2048"):
  register(
    _pgx_class(
      f"pgx-{_id}",
      _id,
      MAX_GAME_LENGTH[_id],
      _id in HIDDEN_CHANCE,
      "single" if _id == "2048" else "zero_sum",
    )
  )
