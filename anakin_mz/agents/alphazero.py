"""AlphaZero on the true model, in the NDMZ search (`agent: alphazero`).

The search is `search.ndmz_search`, unchanged: only its model differs. A node's
embedding is the real game state (`TrueState`), and `TrueModel.recurrent`
steps the game:

* the next state is `env.step(state, action)`, a player action at a choice
  node, the chance outcome at a chance node (unified action `A + c`);
* node kinds come from the game, as one-hot identity logits (0 for the true
  class, -inf elsewhere, so both identity modes read them exactly): the
  relative player from `current_player`, chance, or terminal from
  `terminated` (and truncation);
* a chance node's children priors are the game's `chance_probs` exactly
  (log-probabilities; impossible outcomes get the masking logit);
* a choice node's prior is the network's policy over the legal moves only
  (illegal moves get the masking logit, which the search treats as invalid);
* the reward is the game's, for the root mover; the value is the network's
  (h then f on the observation), and at a chance node the exact expectation
  over its outcomes (`anakin_mz.core.lookahead`), since the network is trained at
  decision nodes only.

Only the representation and prediction networks are trained
(`alphazero_loss`: value and choice policy at the sampled decision node, plus
L2); the dynamics network exists in the params but is never used. Self-play,
replay, the learner loop and checkpoints are the Anakin learner's
(`AlphaZeroLearner`, `agents.replay_learner.Learner` with this loss).
"""

from __future__ import annotations

from typing import Dict, Tuple

import chex
import jax
import jax.numpy as jnp
import optax

import envs
from anakin_mz.core import act, lookahead
from anakin_mz.core.loss import LossConfig, l2_norm_squared, value_loss
from anakin_mz.core.networks import Network, NetworkConfig
from anakin_mz.core.replay import Batch
from anakin_mz.core import registry
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.core.search import SearchConfig, SearchOutput
from anakin_mz.core.types import ModelOutput, Params, certain_identity_logits, relative_identity


@chex.dataclass(frozen=True)
class TrueState:
  """The embedding of a node of the AlphaZero search.

  Attributes:
    state: `envs.State` `[B]`, the real game state of the node.
    root_player: int32 `[B]`, the player to move at the search's root.
  """

  state: envs.State
  root_player: chex.Array


def _masked_logits(logits: chex.Array, valid: chex.Array) -> chex.Array:
  """Logits shifted to max 0, the masking logit (finfo.min) where invalid."""
  logits = logits - jnp.max(jnp.where(valid, logits, -jnp.inf), axis=-1, keepdims=True)
  return jnp.where(valid, logits, jnp.finfo(logits.dtype).min)


class TrueModel(Network):
  """The network (h and f) plus the real game as the search's model.

  `state_root` and `recurrent` are what `search` hands the NDMZ search;
  everything else (init, represent, predict, unroll) is `Network`'s.
  """

  def __init__(self, env: envs.Env, config: NetworkConfig, *, discount: float):
    super().__init__(env, config)
    self.env = env
    self.discount = float(discount)

  def _evaluate(self, params: Params, observation: chex.Array) -> Tuple[chex.Array, chex.Array]:
    """(policy logits `[M, A]`, value `[M]`), h then f."""
    policy, _, value = self.predict(params, self.represent(params, observation))
    return policy, self.to_scalar(value)

  def state_root(self, params: Params, state: envs.State) -> ModelOutput:
    """The search root for the batched decision states `state` `[B]`."""
    policy, value = self._evaluate(params, state.observation)
    batch = policy.shape[0]
    return ModelOutput(
      reward=jnp.zeros((batch,), jnp.float32),
      value=value,
      policy_logits=policy,
      chance_logits=jnp.zeros((batch, self.num_chance_outcomes), jnp.float32),
      identity_logits=jnp.zeros((batch, self.num_identity), jnp.float32),
      embedding=TrueState(
        state=state, root_player=jnp.maximum(state.current_player, 0).astype(jnp.int32)
      ),
    )

  def recurrent(
    self, params: Params, rng_key: chex.PRNGKey, action: chex.Array, embedding: TrueState
  ) -> ModelOutput:
    """The real game then f: a `types.RecurrentFn` on `TrueState`s."""
    del rng_key
    env = self.env
    state, root_player = embedding.state, embedding.root_player
    is_outcome = action >= self.num_actions
    env_action = jnp.where(is_outcome, action - self.num_actions, action).astype(jnp.int32)
    nxt = jax.vmap(env.step)(state, env_action)
    children = lookahead.chance_children(env, nxt)
    policy, values = self._evaluate(params, lookahead.observations(nxt, children))
    batch = action.shape[0]
    value = lookahead.state_values(env, nxt, children, values, root_player, discount=self.discount)
    reward = jnp.take_along_axis(nxt.rewards, root_player[:, None], axis=-1)[:, 0]
    identity = relative_identity(nxt.current_player, root_player, self.num_players)
    identity_logits = certain_identity_logits(identity, self.num_identity)
    return ModelOutput(
      reward=reward,
      value=value,
      policy_logits=_masked_logits(policy[:batch], nxt.legal_action_mask),
      chance_logits=_masked_logits(
        jnp.log(jnp.maximum(nxt.chance_probs, jnp.finfo(jnp.float32).tiny)),
        nxt.chance_probs > 0,
      ),
      identity_logits=identity_logits,
      embedding=TrueState(state=nxt, root_player=root_player),
    )


def alphazero_loss(
  params: Params, network: Network, batch: Batch, config: LossConfig
) -> Tuple[chex.Array, Dict[str, chex.Array]]:
  """AlphaZero's loss on the sampled decision nodes (depth 0 of the batch):
  value (to the game outcome, or the configured n-step target) and choice
  policy (to the search visits), weighted as in `loss.LossConfig`, plus L2.
  The reward, chance and identity terms are not part of it (no dynamics)."""
  policy_logits, _, value_logits = network.predict(
    params, network.represent(params, batch.observation)
  )
  value = jnp.mean(
    value_loss(
      value_logits,
      batch.target_value[:, 0],
      network.config.value_head,
      network.config.support_size,
    )
  )
  policy = optax.softmax_cross_entropy(policy_logits, batch.target_policy[:, 0])
  policy = jnp.mean(jnp.where(batch.policy_mask[:, 0], policy, 0.0))
  l2 = config.l2 * l2_norm_squared({"h": params["h"], "f": params["f"]})  # g is unused
  loss = config.value_weight * value + config.policy_weight * policy + l2
  return loss, {"value": value, "policy": policy, "l2": l2, "total": loss}


def search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  model: TrueModel,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """AlphaZero's `act.SearchFn`: the NDMZ search on the real game, rooted at
  the batched states `state` `[B]` themselves (`TrueModel.state_root`)."""
  return act.tree_search(
    params,
    state,
    key,
    root=model.state_root(params, state),
    recurrent_fn=model.recurrent,
    env=env,
    config=config,
    temperature=temperature,
  )


class AlphaZeroLearner(Learner):
  """The Anakin learner with the true model in the search and AlphaZero's loss."""

  READS_SIBLINGS = False  # its loss trains no learned model

  def _loss(self, params, batch):
    return alphazero_loss(params, self.network, batch, self.config.loss)


def check(config) -> None:
  """Refuses what AlphaZero's search cannot do."""
  if not config.search.terminal_nodes:
    raise ValueError(
      "agent alphazero needs search.terminal_nodes: true (the game's terminal "
      "nodes are never expanded); remove search.terminal_nodes=false"
    )


AGENT = registry.register(
  registry.AgentSpec(
    name="alphazero",
    learner=AlphaZeroLearner,
    model=lambda config, env: TrueModel(env, config.network, discount=config.discount),
    greedy=act.root_greedy,
    value=act.root_value,
    search=search,
    capabilities=registry.Capabilities(ndmz_network=True, tree=True, true_model=True),
    check=check,
  )
)
