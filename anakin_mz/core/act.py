"""How an agent acts: the pieces its moves are built from, as `envs.Policy`s
(`policy(state, key) -> actions`, batched states, key last).

An agent hands the runtime its search as a `SearchFn` (`core.registry`);
self-play (`selfplay.rollout`) runs it with a temperature, and `search_player`
plays it greedily in evaluation, `play.py` and the opponents. The agents that
search the NDMZ tree on a model's root and recurrent function share
`tree_search` (`model_search` on a learned model); `logits_player` is the
greedy choice of any policy head (`root_greedy` a learned model's). Chance
outcomes come from `envs.chance_outcome`, the one chance sampler.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import chex
import jax.numpy as jnp

import envs
from anakin_mz.core.search import SearchConfig, SearchOutput, ndmz_search
from anakin_mz.core.types import Model, ModelOutput, Params, RecurrentFn


class SearchFn(Protocol):
  """An agent's search from the batched states `state` `[B]` (lanes that are
  not at a decision node may be searched too; the callers ignore them)."""

  def __call__(
    self,
    params: Params,
    state: envs.State,
    key: chex.PRNGKey,
    *,
    model: Model,
    env: envs.Env,
    config: SearchConfig,
    temperature: chex.Numeric,
  ) -> SearchOutput: ...


def decision_mask(state: envs.State) -> chex.Array:
  """bool `[B, A]`: the legal moves of the decision states of `state` `[B]`,
  all moves elsewhere (so a search there stays well defined; its result is
  ignored)."""
  decision = state.current_player >= 0
  return jnp.where(decision[:, None], state.legal_action_mask, True)


def tree_search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  root: ModelOutput,
  recurrent_fn: RecurrentFn,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """The NDMZ search (`search.ndmz_search`) from the batched states `state`
  `[B]`, whose roots the model gave as `root`, expanding with the model's
  `recurrent_fn`."""
  return ndmz_search(
    params,
    key,
    root,
    recurrent_fn,
    decision_mask(state),
    num_players=env.num_players,
    payoff=env.payoff,
    config=config,
    temperature=temperature,
  )


def model_search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  model: Model,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """A `SearchFn`: the NDMZ search on a learned model (`networks.Network`),
  its roots from the observations (`model.root`), expanded with
  `model.recurrent`."""
  return tree_search(
    params,
    state,
    key,
    root=model.root(params, state.observation),
    recurrent_fn=model.recurrent,
    env=env,
    config=config,
    temperature=temperature,
  )


def eval_search_config(config: SearchConfig) -> SearchConfig:
  """The search used in evaluation: no root noise (moves are greedy)."""
  return dataclasses.replace(config, dirichlet_fraction=0.0)


def search_player(
  search: SearchFn, model: Model, params: Params, env: envs.Env, config: SearchConfig
) -> envs.Policy:
  """The greedy search agent: `search` with no root noise at temperature 0."""
  config = eval_search_config(config)

  def policy(state: envs.State, key: chex.PRNGKey) -> chex.Array:
    return search(params, state, key, model=model, env=env, config=config, temperature=0.0).action

  return policy


def logits_player(policy_logits: Callable[[chex.Array], chex.Array]) -> envs.Policy:
  """The greedy choice of a policy head: the legal move of the highest logit
  of `policy_logits(observation [B, *obs]) -> [B, A]`."""

  def policy(state: envs.State, key: chex.PRNGKey) -> chex.Array:
    del key
    logits = policy_logits(state.observation)
    return jnp.argmax(jnp.where(state.legal_action_mask, logits, -jnp.inf), axis=-1).astype(
      jnp.int32
    )

  return policy


def root_greedy(model: Model, params: Params) -> envs.Policy:
  """The greedy choice of a model's policy head at the root (a model with
  `root(params, observation) -> ModelOutput`, as `networks.Network`)."""
  return logits_player(lambda obs: model.root(params, obs).policy_logits)


def root_value(model: Model, params: Params) -> Callable[[chex.Array], chex.Array]:
  """A model's value head at the root, `[M, *obs]` -> `[M]` (the mover's
  view), for a model with `root` as `root_greedy`'s."""
  return lambda obs: model.root(params, obs).value
