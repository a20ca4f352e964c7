"""Players that take a learned-model agent apart, for the planning diagnosis
(`docs/results/planning.md`): each keeps one part of the search and swaps
another, so that scoring them side by side (Nannon's exact evaluator) says
which part loses strength.

* `model_1ply`: one move on the *learned model*, no tree and no prior: each
  legal move is valued `r + discount * v` of `g(h(o), a)`, the model's
  afterstate (a terminal prediction counts its reward alone). Against the
  value head's 1-ply on the real game (`--player value`) it measures the
  model's error one step out.
* `model_chance`: the same, with the chance that follows averaged one step
  deeper on the model: `r + discount * sum_c p_c (r_c + discount * v_c)`
  over the model's chance policy `p` at the afterstate and the states
  `g(g(h(o), a), c)` (where the afterstate's identity is chance; else as
  `model_1ply`). It values each move by the positions the value head was
  trained on (decision nodes), as the real-game lookahead does.
* `true_tree`: the agent's h and f (prior and value) searched in AlphaZero's
  tree on the real game (the `alphazero` agent's model and search), with the
  agent's search settings. Against the agent's own search it isolates the
  learned dynamics; against `model_*` it measures what the tree does with
  the same numbers.

Each is an `envs.Policy` (`policy(state [B], key) -> actions [B]`) that
plays greedily; the move is the first legal one of highest value.
"""

from __future__ import annotations

from typing import Callable, Dict, Sequence

import chex
import jax
import jax.numpy as jnp

import envs
from anakin_mz.core import registry
from anakin_mz.core.search import SearchConfig
from anakin_mz.core.search.tree import expected_chance_value
from anakin_mz.core.types import Model, Params

PLANNING_POLICIES = ("model_1ply", "model_chance", "true_tree")


def model_action_values(
  model: Model,
  params: Params,
  observation: chex.Array,
  *,
  num_players: int,
  discount: float,
  expect_chance: bool,
) -> chex.Array:
  """`[B, A]` each action's value on the learned model, from the mover's
  view (the module's `model_1ply`, or `model_chance` with
  `expect_chance`).

  Args:
    model: a learned model with `root(params, obs)` and `recurrent(params,
      key, unified_action, embedding)` (`networks.Network`); values and
      rewards of `recurrent` are the root mover's.
    params: its parameters.
    observation: `[B, *obs]` observations of decision nodes.
    num_players: P; the identity class `P` is chance, `P + 1` terminal.
    discount: per-transition discount.
    expect_chance: average the chance that follows one step deeper.
  """
  root = model.root(params, observation)
  batch, num_actions = root.policy_logits.shape
  key = jax.random.PRNGKey(0)  # a learned model's recurrent function ignores it

  def expand(embedding, unified):
    return model.recurrent(params, key, unified.astype(jnp.int32), embedding)

  def repeat(tree, n):
    return jax.tree.map(lambda x: jnp.repeat(x, n, axis=0), tree)

  first = expand(repeat(root.embedding, num_actions), jnp.tile(jnp.arange(num_actions), batch))
  kind = jnp.argmax(first.identity_logits, axis=-1)
  terminal = kind == num_players + 1
  after = jnp.where(terminal, 0.0, first.value)
  if expect_chance:
    expected = expected_chance_value(
      params,
      key,
      first,
      model.recurrent,
      num_actions=num_actions,
      num_players=num_players,
      discount=discount,
    )
    after = jnp.where(kind == num_players, expected, after)
  return (first.reward + discount * after).reshape(batch, num_actions)


def model_lookahead_policy(
  model: Model, params: Params, env: envs.Env, *, discount: float, expect_chance: bool
) -> envs.Policy:
  """The greedy player of `model_action_values` (the module's `model_1ply`
  or, with `expect_chance`, `model_chance`)."""

  def policy(state: envs.State, key: chex.PRNGKey) -> chex.Array:
    del key
    q = model_action_values(
      model,
      params,
      state.observation,
      num_players=env.num_players,
      discount=discount,
      expect_chance=expect_chance,
    )
    return jnp.argmax(jnp.where(state.legal_action_mask, q, -jnp.inf), axis=-1).astype(jnp.int32)

  return policy


def true_tree_policy(config, params: Params, env: envs.Env, search: SearchConfig) -> envs.Policy:
  """The agent's network (h and f) in AlphaZero's tree on the real game with
  the search settings `search` (the module's `true_tree`). `config` is the
  agent's `Config`; its network must be an NDMZ network (the `alphazero`
  agent's model reads the same parameters)."""
  alphazero = registry.get("alphazero")
  if not alphazero.capabilities.supports(env):
    raise ValueError(
      f"true_tree searches the real game, which {env.id} does not allow "
      f"({registry.unsupported_reason(env)})"
    )
  model = alphazero.model(config, env)
  return alphazero.search_policy(model, params, env, search)


def planning_policies(agent, search: SearchConfig, names: Sequence[str]) -> Dict[str, envs.Policy]:
  """The named players of `PLANNING_POLICIES` for a restored agent
  (`runtime.restore.Agent`) with search settings `search`.

  Raises:
    ValueError: an unknown name, or an agent without a learned NDMZ model.
  """
  unknown = [n for n in names if n not in PLANNING_POLICIES]
  if unknown:
    raise ValueError(f"unknown planning players {unknown}; valid: {', '.join(PLANNING_POLICIES)}")
  caps = agent.spec.capabilities
  if names and not (caps.learned_model and caps.ndmz_network):
    raise ValueError(
      f"{', '.join(names)} take apart a learned NDMZ model; agent {agent.config.agent!r} "
      "has none (only ndmz checkpoints have one)"
    )
  builders: Dict[str, Callable[[], envs.Policy]] = {
    "model_1ply": lambda: model_lookahead_policy(
      agent.network, agent.params, agent.env, discount=agent.config.discount, expect_chance=False
    ),
    "model_chance": lambda: model_lookahead_policy(
      agent.network, agent.params, agent.env, discount=agent.config.discount, expect_chance=True
    ),
    "true_tree": lambda: true_tree_policy(agent.config, agent.params, agent.env, search),
  }
  return {name: builders[name]() for name in names}
