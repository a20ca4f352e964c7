"""Any gymnax environment as a single-player `envs.Env` (`from_gymnax`), and
the five MinAtar games registered as `minatar-<game>`.

The wrapped env is one player (0) with every action legal; its reward goes to
player 0; `gymnax`'s natural termination ends the game (`terminated`) and its
episode limit `max_steps_in_episode` becomes `max_game_length` (`truncated`).
Chance stays inside gymnax's keyed `step_env` (see `envs/adapters/hidden.py`).
The observation is gymnax's, as float32 planes (`observation="planes"`) or
flattened (`"flat"`). With `history=L` > 1 it is the last L frames and the
actions between them, stacked on the channel axis as the MooZi thesis does
(4.3.4, L = 4 on MinAtar): MinAtar's frame hides timers that decide what
comes next (Space Invaders' alien move and shot timers, the cannon's
cool-down), which a few frames reveal.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Type

import jax
import jax.numpy as jnp
from flax import struct

from envs.adapters.hidden import (
  HiddenChanceEnv,
  KeyedGame,
  keyed_player,
  render_array,
  require,
)
from envs.core import Env, ParamValue
from envs.registry import build, register

OBSERVATIONS = ("planes", "flat")
# The adapter's own parameters that every wrapped game has, with their defaults.
VIEW_DEFAULTS = {"observation": "planes", "history": 1}


@struct.dataclass
class GymnaxInner:
  """gymnax's state and its last observation (gymnax computes it in step)."""

  state: object
  obs: jax.Array


@struct.dataclass
class GymnaxHistoryInner:
  """`GymnaxInner` with `history` L > 1: the L - 1 frames and the L actions
  before the newest frame. (A class of its own, so that L = 1 keeps the
  state, and so the checkpoints, of the games before `history` existed.)

  Attributes:
    state: gymnax's state pytree.
    obs: the newest frame, gymnax's observation `[H, W, C]`.
    past_frames: `[L - 1, H, W, C]` float32, oldest first; zeros before the
      episode began.
    past_actions: `[L, A]` float32 one-hot, the action that led into each of
      the L frames, oldest first; zeros before the episode began and for the
      first frame.
  """

  state: object
  obs: jax.Array
  past_frames: jax.Array
  past_actions: jax.Array


class GymnaxGame(KeyedGame):
  """A gymnax environment behind `envs.Game`. Subclasses set `gymnax_id`."""

  payoff = "single"
  gymnax_id: str = ""
  gymnax_env = None  # an Environment instance to wrap instead of `gymnax.make`
  gymnax_env_params = None  # ... and its EnvParams
  env_class = HiddenChanceEnv
  # Adapter parameters; every other parameter is a field of gymnax's EnvParams.
  adapter_params = {**VIEW_DEFAULTS, "minimal_action_set": True}

  def __init__(self, **params: ParamValue):
    super().__init__(**params)
    if self.gymnax_env is not None:
      self._env, default = self.gymnax_env, self.gymnax_env_params
    else:
      gymnax = require("gymnax")
      kwargs = {}
      if "minimal_action_set" in params:
        kwargs["use_minimal_action_set"] = params["minimal_action_set"]
      self._env, default = gymnax.make(self.gymnax_id, **kwargs)
    fields = {k: v for k, v in params.items() if k not in self.adapter_params}
    self._env_params = default.replace(**fields)
    space = self._env.action_space(self._env_params)
    if not hasattr(space, "n"):
      raise ValueError(
        f"{self.name}: gymnax {self.gymnax_id!r} has a {type(space).__name__} action space; "
        "only discrete action spaces can be wrapped"
      )
    self._num_actions = int(space.n)
    obs, _ = jax.eval_shape(self._env.reset_env, jax.random.PRNGKey(0), self._env_params)
    self._frame_shape = tuple(obs.shape)
    self._history = int(params.get("history", 1))
    if self._history > 1:  # L frames and L action planes of A each, on the channels
      if len(self._frame_shape) != 3:
        raise ValueError(
          f"{self.name}: history > 1 needs [H, W, C] planes, gymnax "
          f"{self.gymnax_id!r} observes {self._frame_shape}"
        )
      h, w, c = self._frame_shape
      self._obs_shape = (h, w, self._history * (c + self._num_actions))
    else:
      self._obs_shape = self._frame_shape
    self._flat = params.get("observation", "planes") == "flat"

  @classmethod
  def validate_params(cls, params) -> None:
    if params.get("observation", "planes") not in OBSERVATIONS:
      raise ValueError(
        f"{cls.name}: observation must be one of {OBSERVATIONS}, got {params['observation']!r}"
      )
    if params.get("max_steps_in_episode", 1) < 1:
      raise ValueError(f"{cls.name}: max_steps_in_episode must be >= 1")
    history = params.get("history", 1)
    if isinstance(history, bool) or not isinstance(history, int) or history < 1:
      raise ValueError(
        f"{cls.name}: history must be an integer >= 1 (frames observed), got {history!r}"
      )

  @property
  def num_players(self) -> int:
    return 1

  @property
  def num_actions(self) -> int:
    return self._num_actions

  @property
  def observation_shape(self):
    if self._flat:
      return (int(jnp.prod(jnp.array(self._obs_shape))),)
    return self._obs_shape

  @property
  def max_game_length(self) -> int:
    return int(self._env_params.max_steps_in_episode)

  def keyed_init(self, key):
    obs, state = self._env.reset_env(key, self._env_params)
    if self._history == 1:
      return GymnaxInner(state=state, obs=obs), jnp.bool_(False)
    past_frames = jnp.zeros((self._history - 1,) + self._frame_shape, jnp.float32)
    past_actions = jnp.zeros((self._history, self._num_actions), jnp.float32)
    inner = GymnaxHistoryInner(
      state=state, obs=obs, past_frames=past_frames, past_actions=past_actions
    )
    return inner, jnp.bool_(False)

  def keyed_step(self, inner, action, key):
    obs, state, reward, terminated, _ = self._env.step_env(
      key, inner.state, action, self._env_params
    )
    rewards = jnp.reshape(jnp.asarray(reward, jnp.float32), (1,))
    if self._history == 1:
      return GymnaxInner(state=state, obs=obs), rewards, terminated
    # Shift the window by one frame.
    newest = jnp.asarray(inner.obs, jnp.float32)[None]
    past_frames = jnp.concatenate([inner.past_frames[1:], newest])
    one_hot = jax.nn.one_hot(action, self._num_actions, dtype=jnp.float32)[None]
    past_actions = jnp.concatenate([inner.past_actions[1:], one_hot])
    inner = GymnaxHistoryInner(
      state=state, obs=obs, past_frames=past_frames, past_actions=past_actions
    )
    return inner, rewards, terminated

  def current_player(self, g):
    return keyed_player(g, jnp.int32(0))

  def legal_action_mask(self, g):
    del g
    return jnp.ones((self._num_actions,), jnp.bool_)

  def observe(self, g, player):
    del player
    obs = jnp.asarray(g.inner.obs, jnp.float32)
    if self._history > 1:
      inner = g.inner
      h, w, c = self._frame_shape
      frames = jnp.concatenate([inner.past_frames, obs[None]])  # [L, H, W, C], oldest first
      frames = jnp.moveaxis(frames, 0, 2).reshape(h, w, self._history * c)
      actions = jnp.broadcast_to(inner.past_actions.reshape(-1), (h, w, inner.past_actions.size))
      obs = jnp.concatenate([frames, actions], axis=-1)
    return obs.reshape(self.observation_shape)

  def render(self, g) -> str:
    return render_array(g.inner.obs)


def _gymnax_params(gymnax_id: str, minimal_action_set: Optional[bool]) -> Dict[str, ParamValue]:
  """gymnax's default EnvParams of `gymnax_id` as scalar parameters."""
  gymnax = require("gymnax")
  if gymnax_id not in gymnax.registered_envs:
    raise ValueError(
      f"unknown gymnax env {gymnax_id!r}; gymnax envs: {', '.join(gymnax.registered_envs)}"
    )
  kwargs = {} if minimal_action_set is None else {"use_minimal_action_set": minimal_action_set}
  return _scalar_fields(gymnax.make(gymnax_id, **kwargs)[1])


def _scalar_fields(default) -> Dict[str, ParamValue]:
  out = {}
  for f in dataclasses.fields(default):
    v = getattr(default, f.name)
    if isinstance(v, (bool, int, float)):
      out[f.name] = v
  return out


_CLASSES: Dict[str, Type[GymnaxGame]] = {}


def from_gymnax(name, env_params=None, **params: ParamValue) -> Env:
  """Any gymnax environment (a gymnax id, e.g. "Breakout-MinAtar",
  "CartPole-v1", "Catch-bsuite", or an `Environment` instance with its
  `env_params`, as `gymnax.make` returns them) as a single-player `envs.Env`.

  `params`: `observation` ("planes" or "flat"), `history` (frames observed,
  module doc), `minimal_action_set` (for the MinAtar games), and any scalar
  field of the env's gymnax `EnvParams` (e.g. `max_steps_in_episode`, the
  truncation limit). Raises ValueError for
  an unknown id or parameter, ImportError if gymnax is not installed.
  """
  if not isinstance(name, str):
    if env_params is None:
      env_params = name.default_params
    cls = type(
      f"Gymnax_{name.name}",
      (GymnaxGame,),
      {
        "name": f"gymnax:{name.name}",
        "gymnax_id": name.name,
        "gymnax_env": name,
        "gymnax_env_params": env_params,
        "default_params": {**VIEW_DEFAULTS, **_scalar_fields(env_params)},
      },
    )
    return build(cls, params)
  if env_params is not None:
    raise ValueError("from_gymnax(name): pass parameters by keyword, not env_params")
  if name not in _CLASSES:
    minimal = params.get("minimal_action_set")
    defaults = dict(VIEW_DEFAULTS)
    if name.endswith("-MinAtar"):
      defaults["minimal_action_set"] = True
    defaults.update(_gymnax_params(name, minimal if isinstance(minimal, bool) else None))
    _CLASSES[name] = type(
      f"Gymnax_{name}",
      (GymnaxGame,),
      {"name": f"gymnax:{name}", "gymnax_id": name, "default_params": defaults},
    )
  return build(_CLASSES[name], params)


# The MinAtar games, registered (the names follow pgx's `minatar-<game>`).
# Their parameters are the adapter's and the truncation limit (gymnax's
# default); `from_gymnax` exposes every other gymnax parameter.
MINATAR = {
  "breakout": ("Breakout-MinAtar", 1000),
  "asterix": ("Asterix-MinAtar", 1000),
  "freeway": ("Freeway-MinAtar", 2500),
  "space_invaders": ("SpaceInvaders-MinAtar", 1000),
  "seaquest": ("Seaquest-MinAtar", 1000),
}

for _game, (_gid, _limit) in MINATAR.items():
  register(
    type(
      f"MinAtar_{_game}",
      (GymnaxGame,),
      {
        "name": f"minatar-{_game}",
        "gymnax_id": _gid,
        "default_params": {
          **VIEW_DEFAULTS,
          "minimal_action_set": True,
          "max_steps_in_episode": _limit,
        },
      },
    )
  )
