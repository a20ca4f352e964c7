"""Exact scoring of an agent on Nannon with the solver (`envs.nannon_solver`):
no sampling noise. The agent's move in every (position, roll) is computed in
one batched pass, and policy evaluation gives its exact win probability."""

from __future__ import annotations

from typing import Dict, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import nannon_solver
from anakin_mz.networks import Network
from anakin_mz.search import SearchConfig
from anakin_mz.selfplay import eval_search_config, search_policy
from anakin_mz.types import Params


def greedy_table(env: envs.Env, network: Network, params: Params) -> np.ndarray:
  """int8 `[N, d]`: the network's greedy legal move (argmax policy logits) in
  every decision (position, roll); -1 where there is no decision."""

  @jax.jit
  def act(states):
    logits = network.root(params, states.observation).policy_logits
    return jnp.argmax(jnp.where(states.legal_action_mask, logits, -jnp.inf), -1)

  return nannon_solver.policy_table_from_fn(env, act, batch_size=4096)


def search_table(env: envs.Env, network: Network, params: Params,
                 config: SearchConfig, key: chex.PRNGKey) -> np.ndarray:
  """int8 `[N, d]`: the greedy search agent's move in every decision
  (position, roll), one search each, at the fixed PRNG `key`."""
  config = eval_search_config(config)

  @jax.jit
  def act(states):
    return search_policy(params, key, states, network=network, env=env,
                         config=config, temperature=0.0).action

  return nannon_solver.policy_table_from_fn(env, act, batch_size=1024)


def exact_scores(env: envs.Env, table: np.ndarray,
                 prefix: str = "exact/greedy") -> Dict[str, float]:
  """Exact win probabilities of a move table against optimal and random."""
  vs_opt = nannon_solver.exact_win_probability(table, "optimal", env)
  vs_rand = nannon_solver.exact_win_probability(table, "random", env)
  return {f"{prefix}_vs_optimal": vs_opt.win_probability,
          f"{prefix}_vs_random": vs_rand.win_probability}


def learner_hook(learner, params, key: Optional[chex.PRNGKey] = None) -> Dict[str, float]:
  """`run.EXTRA_EVALS` entry: exact scores of the greedy network policy."""
  del key
  return exact_scores(learner.env, greedy_table(learner.env, learner.network, params))
