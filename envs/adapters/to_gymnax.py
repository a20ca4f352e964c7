"""Our games in gymnax's API (`to_gymnax`): a `gymnax` `Environment` at
decision nodes.

`reset_env(key, params)` is our `reset(key)`; `step_env(key, state, action,
params)` our keyed step, so chance nodes are drawn inside it (the one
inverse-CDF rule of `envs.core`, as `envs.chance_outcome`); gymnax's own
`step` and `reset` (auto-reset, the time limit as `truncated`) wrap them
unchanged. The observation is the mover's (float32 `observation_shape`), the
action space `Discrete(num_actions)`.

gymnax is single-agent: in games of more players the one agent plays every
seat, and `reward` is the reward of the player who moved (in a zero-sum
game, negate the value across turns, as self-play does). `info` holds what
a game-aware caller needs: `legal_action_mask` (bool `[num_actions]`, of the
returned state), `current_player` (the next mover) and `rewards` (float32
`[num_players]`). An illegal action ends the episode with the contract's
penalty (-1 to the mover).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from envs.adapters.hidden import require
from envs.core import Env


def to_gymnax(env: Env):
  """`env` (an `envs.Env`) as a gymnax `Environment`; returns `(gymnax_env,
  env_params)` as `gymnax.make` does. Raises ImportError without gymnax."""
  require("gymnax")
  from gymnax.environments import environment, spaces  # pylint: disable=import-outside-toplevel

  if not isinstance(env, Env):
    raise TypeError(f"to_gymnax takes an envs.Env (from envs.make), got {type(env).__name__}")

  @struct.dataclass
  class EnvState(environment.EnvState):
    """gymnax's `time` and our `envs.State`."""

    inner: Any = None

  @struct.dataclass
  class EnvParams(environment.EnvParams):
    max_steps_in_episode: int = env.max_game_length

  class GymnaxEnv(environment.Environment):
    """One of our games as a gymnax Environment (see `envs/adapters/to_gymnax.py`)."""

    @property
    def default_params(self) -> EnvParams:
      return EnvParams()

    def step_env(self, key, state, action, params):
      del params
      s = state.inner
      mover = jnp.maximum(s.current_player, 0)
      nxt = env.step(s, jnp.asarray(action, jnp.int32), key)
      state = EnvState(time=state.time + 1, inner=nxt)
      reward = jnp.where(s.done, 0.0, nxt.rewards[mover])
      info = {
        "legal_action_mask": nxt.legal_action_mask,
        "current_player": nxt.current_player,
        "rewards": nxt.rewards,
        "discount": self.discount(state, None),
      }
      obs = jax.lax.stop_gradient(nxt.observation)
      return obs, jax.lax.stop_gradient(state), reward, nxt.terminated, info

    def reset_env(self, key, params):
      del params
      s = env.reset(key)
      return s.observation, EnvState(time=0, inner=s)

    def get_obs(self, state, params=None, key=None):
      del params, key
      return state.inner.observation

    def is_terminated(self, state, params) -> jax.Array:
      del params
      return state.inner.terminated

    def is_truncated(self, state, params) -> jax.Array:
      # Our own limit (`max_game_length`) or gymnax's, whichever comes first.
      return state.inner.truncated | (state.time >= params.max_steps_in_episode)

    @property
    def name(self) -> str:
      return env.id

    @property
    def num_actions(self) -> int:
      return env.num_actions

    def action_space(self, params=None) -> spaces.Discrete:
      del params
      return spaces.Discrete(env.num_actions)

    def observation_space(self, params=None) -> spaces.Box:
      del params
      # Observations are float32 features; no game here has a known bound.
      return spaces.Box(-jnp.inf, jnp.inf, env.observation_shape, jnp.float32)

    def state_space(self, params=None):
      del params
      return spaces.Dict({"time": spaces.Discrete(env.max_game_length + 1)})

  GymnaxEnv.__name__ = GymnaxEnv.__qualname__ = f"Gymnax_{env.id}"
  g = GymnaxEnv()
  return g, g.default_params
