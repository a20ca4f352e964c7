"""Evaluation matches on device: the agent (greedy search, or the greedy
network policy without search) against an opponent policy, all games in one
jitted `while_loop`. In two-player zero-sum games the agent takes each seat
in half of the games; otherwise the agent plays every seat.
"""

from __future__ import annotations

from typing import Callable, Dict

import chex
import jax
import jax.numpy as jnp

import envs
from anakin_mz.networks import Network
from anakin_mz.search import SearchConfig
from anakin_mz.selfplay import eval_search_config, sample_chance, search_policy
from anakin_mz.types import Params

# policy(key, state [B]) -> action [B]; only read at decision nodes.
Policy = Callable[[chex.PRNGKey, envs.State], chex.Array]


def random_policy(key: chex.PRNGKey, state: envs.State) -> chex.Array:
  """`[B]` uniformly random legal actions."""
  logits = jnp.where(state.legal_action_mask, 0.0, -jnp.inf)
  logits = jnp.where(jnp.any(state.legal_action_mask, -1, keepdims=True), logits, 0.0)
  return jax.random.categorical(key, logits).astype(jnp.int32)


def greedy_network_policy(network: Network, params: Params) -> Policy:
  """The network's greedy choice policy (argmax of legal policy logits)."""

  def policy(key, state):
    del key
    logits = network.root(params, state.observation).policy_logits
    return jnp.argmax(jnp.where(state.legal_action_mask, logits, -jnp.inf),
                      axis=-1).astype(jnp.int32)
  return policy


def search_agent_policy(network: Network, params: Params, env: envs.Env,
                        config: SearchConfig) -> Policy:
  """The greedy search agent (no root noise, temperature 0)."""
  config = eval_search_config(config)

  def policy(key, state):
    return search_policy(params, key, state, network=network, env=env,
                         config=config, temperature=0.0).action
  return policy


def play_match(key: chex.PRNGKey, env: envs.Env, agent: Policy,
               opponent: Policy, num_games: int) -> Dict[str, chex.Array]:
  """Plays `num_games` games of `agent` against `opponent`.

  Returns a dict of `[num_games]` arrays: `score` (the agent's total reward),
  `agent_seat`, `length` (transitions), `truncated`.
  """
  zero_sum = env.payoff == "zero_sum"
  seats = jnp.arange(num_games) % env.num_players

  def cond(carry):
    state, _, _ = carry
    return ~jnp.all(state.done)

  def body(carry):
    state, key, score = carry
    key, ka, ko, kc = jax.random.split(key, 4)
    a_agent = agent(ka, state)
    a_opp = opponent(ko, state)
    agent_moves = (state.current_player == seats) if zero_sum else jnp.bool_(True)
    action = jnp.where(agent_moves, a_agent, a_opp)
    action = jnp.where(state.current_player == envs.CHANCE,
                       sample_chance(kc, state), action)
    nxt = jax.vmap(env.step)(state, action.astype(jnp.int32))
    mine = jnp.take_along_axis(nxt.rewards, seats[:, None], axis=1)[:, 0]
    return nxt, key, score + mine

  k0, k1 = jax.random.split(key)
  state = jax.vmap(env.init)(jax.random.split(k0, num_games))
  state, _, score = jax.lax.while_loop(
      cond, body, (state, k1, jnp.zeros((num_games,), jnp.float32)))
  return {"score": score, "agent_seat": seats, "length": state.step_count,
          "truncated": state.truncated}


def summarize(result: Dict[str, chex.Array]) -> Dict[str, float]:
  """Mean/std score and, for win/loss games, win/draw/loss rates."""
  score = result["score"]
  return {
      "score_mean": float(jnp.mean(score)),
      "score_std": float(jnp.std(score)),
      "win_rate": float(jnp.mean(score > 0)),
      "draw_rate": float(jnp.mean(score == 0)),
      "loss_rate": float(jnp.mean(score < 0)),
      "mean_length": float(jnp.mean(result["length"])),
  }
