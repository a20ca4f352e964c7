"""How the agent acts: its moves as `envs.Policy`s (`policy(state, key) ->
actions`, batched states, key last), built on the NDMZ search.

Self-play (`selfplay.rollout`), evaluation (`anakin_mz.eval`), `play.py` and
`show_search.py` all act through this module; chance outcomes come from
`envs.chance_outcome`, the one chance sampler.
"""

from __future__ import annotations

import dataclasses

import chex
import jax.numpy as jnp

import envs
from anakin_mz import alphazero, lookahead, stochastic_muzero, tdlambda
from anakin_mz import config as config_lib
from anakin_mz.networks import Network
from anakin_mz.search import SearchConfig, SearchOutput, ndmz_search
from anakin_mz.types import Params


def search_policy(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  network: Network,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """Runs the agent's search from the batched decision states `state` `[B]`.

  The model decides which search (`agents`): a `Network` runs the NDMZ
  search on its learned model; an `alphazero.TrueModel` runs the same search
  on the real game; a `stochastic_muzero.StochasticNetwork` runs
  `mctx.stochastic_muzero_policy` on its afterstate model; a
  `tdlambda.ValueModel` plays TD-Gammon's 1-ply expectimax (no tree:
  `search_tree` is None, temperature unused).

  Lanes that are not at a decision node get an all-legal mask so the search
  stays well defined; their result is ignored by the callers.
  """
  if isinstance(network, tdlambda.ValueModel):
    del key, config, temperature
    return tdlambda.expectimax(network, params, state)
  decision = state.current_player >= 0
  mask = jnp.where(decision[:, None], state.legal_action_mask, True)
  if isinstance(network, stochastic_muzero.StochasticNetwork):
    return stochastic_muzero.smz_search(
      params, key, network, state.observation, mask, config=config, temperature=temperature
    )
  if isinstance(network, alphazero.TrueModel):
    root = network.state_root(params, state)
  else:
    root = network.root(params, state.observation)
  return ndmz_search(
    params,
    key,
    root,
    network.recurrent,
    mask,
    num_players=env.num_players,
    payoff=env.payoff,
    config=config,
    temperature=temperature,
  )


def eval_search_config(config: SearchConfig) -> SearchConfig:
  """The search used in evaluation: no root noise (moves are greedy)."""
  return dataclasses.replace(config, dirichlet_fraction=0.0)


def search_agent_policy(
  network: Network, params: Params, env: envs.Env, config: SearchConfig
) -> envs.Policy:
  """The greedy search agent (no root noise, temperature 0); for TD(lambda)
  its 1-ply expectimax, an `envs.OnePlyPolicy`."""
  if isinstance(network, tdlambda.ValueModel):
    return tdlambda.one_ply_policy(network, params)
  config = eval_search_config(config)

  def policy(state: envs.State, key: chex.PRNGKey) -> chex.Array:
    return search_policy(
      params, state, key, network=network, env=env, config=config, temperature=0.0
    ).action

  return policy


def greedy_network_policy(network: Network, params: Params) -> envs.Policy:
  """The network's greedy choice policy (argmax of legal policy logits); for
  TD(lambda), which has no policy head, its greedy 1-ply expectimax (an
  `envs.OnePlyPolicy`, which exact evaluators may tabulate)."""
  if isinstance(network, tdlambda.ValueModel):
    return tdlambda.one_ply_policy(network, params)

  def policy(state: envs.State, key: chex.PRNGKey) -> chex.Array:
    del key
    logits = network.root(params, state.observation).policy_logits
    return jnp.argmax(jnp.where(state.legal_action_mask, logits, -jnp.inf), axis=-1).astype(
      jnp.int32
    )

  return policy


def value_policy(
  network: Network, params: Params, env: envs.Env, *, discount: float
) -> envs.OnePlyPolicy:
  """The network's value head in TD-Gammon's 1-ply expectimax on the real
  game (`anakin_mz.lookahead`'s rule, as TD(lambda) plays): a diagnostic that
  judges the value head alone, with neither the policy head nor the learned
  dynamics. (For TD(lambda) it is its own player.)

  Raises ValueError where the real game allows no such lookahead (where
  TD(lambda) cannot play: `config.supported_agents`).
  """
  if "tdlambda" not in config_lib.supported_agents(env):
    raise ValueError(
      f"--agent value plays TD(lambda)'s 1-ply expectimax on the real game, which "
      f"{env.id} does not allow ({config_lib.unsupported_reason(env)}); use --agent "
      "search or greedy"
    )
  if isinstance(network, tdlambda.ValueModel):
    return tdlambda.one_ply_policy(network, params)
  return lookahead.one_ply_policy(
    env, lambda obs: network.root(params, obs).value, discount=discount
  )
