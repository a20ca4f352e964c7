"""Self-play: B games in parallel (vmap) in a `lax.scan` over T transitions.

At decision nodes the agent searches (`search.ndmz_search`) and samples its
move from the visit counts with a temperature. At chance nodes the outcome is
sampled from the game's `chance_probs` and fed to the model as the unified
action `num_actions + outcome`. Finished games restart at once (the lane's
next transition belongs to a new episode), so every lane always plays.
"""

from __future__ import annotations

from typing import Tuple

import chex
import jax
import jax.numpy as jnp

import envs
from anakin_mz.act import search_policy
from anakin_mz.networks import Network
from anakin_mz.replay import Transition
from anakin_mz.search import SearchConfig
from anakin_mz.types import Params


@chex.dataclass(frozen=True)
class ActorState:
  """The self-play lanes.

  Attributes:
    env_state: `envs.State` batched `[B]`, never done (lanes restart).
    episode_return: `[B, P]` rewards so far in each lane's current episode.
    episode_length: `[B]` transitions so far in each lane's current episode.
  """

  env_state: envs.State
  episode_return: chex.Array
  episode_length: chex.Array


@chex.dataclass(frozen=True)
class RolloutStats:
  """Totals over one rollout chunk (scalars, or `[P]` for returns)."""

  episodes: chex.Array  # completed episodes
  return_sum: chex.Array  # [P] summed final returns of completed episodes
  length_sum: chex.Array  # summed lengths (transitions) of completed episodes
  decision_steps: chex.Array  # transitions at decision nodes (= searches used)
  transitions: chex.Array  # all valid transitions


def init_actors(env: envs.Env, key: chex.PRNGKey, num_envs: int) -> ActorState:
  """`num_envs` fresh games (each may start at a chance node)."""
  state = jax.vmap(env.init)(jax.random.split(key, num_envs))
  return ActorState(
    env_state=state,
    episode_return=jnp.zeros((num_envs, env.num_players), jnp.float32),
    episode_length=jnp.zeros((num_envs,), jnp.int32),
  )


def rollout(
  params: Params,
  actor: ActorState,
  key: chex.PRNGKey,
  *,
  env: envs.Env,
  network: Network,
  config: SearchConfig,
  num_steps: int,
  temperature: chex.Numeric,
) -> Tuple[ActorState, Transition, RolloutStats]:
  """Plays `num_steps` transitions in every lane.

  Returns the new actor state, the `Transition` record `[T, B]` and the
  chunk's `RolloutStats`.
  """
  num_envs = actor.episode_length.shape[0]
  num_actions = env.num_actions

  def one_step(actor: ActorState, key):
    k_search, k_chance, k_reset = jax.random.split(key, 3)
    s = actor.env_state
    out = search_policy(
      params, s, k_search, network=network, env=env, config=config, temperature=temperature
    )
    is_chance = s.current_player == envs.CHANCE
    outcome = envs.chance_outcome(s, k_chance)
    env_action = jnp.where(is_chance, outcome, out.action).astype(jnp.int32)
    unified = jnp.where(is_chance, num_actions + outcome, out.action)
    nxt = jax.vmap(env.step)(s, env_action)
    decision = s.current_player >= 0
    record = Transition(
      observation=s.observation,
      player=s.current_player,
      action=unified.astype(jnp.int32),
      rewards=nxt.rewards,
      search_policy=jnp.where(decision[:, None], out.action_weights, 0.0),
      search_value=jnp.where(decision, out.root_value, 0.0),
      chance_probs=s.chance_probs,
      next_player=nxt.current_player,
      done=nxt.done,
      truncated=nxt.truncated,
      valid=jnp.ones((num_envs,), jnp.bool_),
    )
    ret = actor.episode_return + nxt.rewards
    length = actor.episode_length + 1
    done = nxt.done
    stats = RolloutStats(
      episodes=jnp.sum(done).astype(jnp.int32),
      return_sum=jnp.sum(jnp.where(done[:, None], ret, 0.0), axis=0),
      length_sum=jnp.sum(jnp.where(done, length, 0)).astype(jnp.int32),
      decision_steps=jnp.sum(decision).astype(jnp.int32),
      transitions=jnp.int32(num_envs),
    )
    fresh = jax.vmap(env.init)(jax.random.split(k_reset, num_envs))
    env_state = jax.tree.map(
      lambda f, x: jnp.where(done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, nxt
    )
    actor = ActorState(
      env_state=env_state,
      episode_return=jnp.where(done[:, None], 0.0, ret),
      episode_length=jnp.where(done, 0, length),
    )
    return actor, (record, stats)

  actor, (records, stats) = jax.lax.scan(one_step, actor, jax.random.split(key, num_steps))
  totals = jax.tree.map(lambda x: jnp.sum(x, axis=0), stats)
  return actor, records, totals
