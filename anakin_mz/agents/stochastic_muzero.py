"""Stochastic MuZero (Antonoglou et al. 2022, "Planning in Stochastic
Environments with a Learned Model") as an agent (`agent: stochastic_muzero`).

The model, six small nets (params `{"h", "f", "phi", "psi", "g", "e"}`):

    h(observation)   -> state s                      (representation)
    f(s)             -> policy logits p, value v      (prediction)
    phi(s, a)        -> afterstate as                 (afterstate dynamics)
    psi(as)          -> afterstate value Q, code prior sigma over C codes
    g(as, c)         -> next state s', reward r, turn logits
    e(observation)   -> code c, one-hot over C        (encoder)

The codebook is the C one-hot vectors. `e` gives logits; the code is the
one-hot of their argmax with a straight-through gradient (the forward pass
sees the one-hot, the backward pass the softmax), as in the paper. C is
`network.chance_codes` (0: the game's `num_chance_outcomes`; a game whose
chance is hidden in its transition, gymnax and pgx's backgammon, declares one
outcome, so set it there, or the model is deterministic). The nets are
the NDMZ MLP blocks of `networks.py` (SELU, LeCun normal, latents min-max
scaled); h may be the "conv" kind's torso, the rest are MLPs.

Search: `mctx.stochastic_muzero_policy`: decision nodes hold states (PUCT
over the policy, the root's illegal moves masked), chance nodes hold
afterstates (children chosen by mctx's deterministic `argmax sigma / (N + 1)`).
A simulation expands one node, so `search.num_simulations` counts decision
and chance nodes alike, as the NDMZ search does. The root prior's Dirichlet
noise and the move's draw are the NDMZ search's (`search.add_root_noise`,
`search.search_output`), so the two agents explore alike. The play search
may be the expectimax instead (`play_search.root: expectimax`,
`smz_expectimax`: the model in NDMZ's node form, so both agents play the
same search; one move deep with `expectimax_afterstate` it ranks the moves
by their afterstate value Q).

Value sign. mctx backs up `Q = r + discount * V(child)` and its PUCT
maximises, so every node's value must be from the view of the player who
chooses there. The game's turn order does not alternate (a Nannon player
with no legal move forfeits: the same player moves twice), so a fixed
discount of -1 would be wrong. We use per-edge discounts instead:

* decision -> afterstate: mctx's reward 0 and discount +1, so an afterstate's
  value (and Q) is from the view of the player who just moved;
* afterstate -> next state: `g` also predicts, by a learned two-class "turn"
  head, whether the next state's mover differs from the afterstate's mover;
  the edge's discount is `discount * (-1 if it does else +1)` (argmax of the
  head) in two-player zero-sum games, `discount` otherwise. The reward `r`
  is from the view of the player who moved.

The turn head is learned (trained to the recorded movers, `identity_weight`),
so the tree uses no ground truth beyond what NDMZ's does: the root's legal
moves. (The paper's own games, 2048 and single-player, and backgammon, which
strictly alternates, did not need this; a fixed perspective would not help,
since a node must still know whose side it maximises for.)

Training (`smz_loss`), a K-step unroll over decision steps
(`sample_decisions`): the replay records every transition, decision
and chance ones alike. Step k of an SMZ unroll is one decision d_k, its
action a_k, and the whole run of chance transitions up to the next decision
d_{k+1}: the encoder sees the observation at d_{k+1} (all zeros where the
episode ended first), so one learned code stands for the whole chance run
(several dice rolls where a turn was forfeited). The terms, each summed over
k and averaged over the batch like NDMZ's eq. (1):

* value (k = 0..K) and afterstate value Q (k = 0..K-1), both to the value
  target at d_k from d_k's mover's view (`loss.value_loss`, `value_weight`);
* reward (k = 0..K-1) to the rewards from d_k to d_{k+1} (`reward_weight`);
* policy to the search visits at d_k, before the episode's end
  (`policy_weight`);
* sigma: cross-entropy of the code prior sigma^k to the encoder's code of
  d_{k+1} (`chance_weight`; the code is a fixed target here, so sigma
  learns to predict the encoder, not the reverse);
* commitment: `||c - softmax(e)||^2` with the one-hot c held fixed
  (`commitment_weight`): it pulls the encoder's distribution to its own
  one-hot code (a straight-through c would give it no gradient);
* turn: cross-entropy of the turn head (`identity_weight`);
* L2 (`loss.l2_norm_squared`).

The encoder learns through the straight-through code that `g` reads: the
value, reward, policy and turn terms after the chance step shape it.

With `discount < 1` a decision's rewards and the next state's value are
discounted per transition in the targets, but by one `discount` per chance
edge in the tree; the two agree for the default `discount: 1` (every board
game here) and where no chance node lies between decisions.

Not supported (refused by the config): the Gumbel root, an expectimax in
self-play (it gives no visits to learn from), reanalyse, the
"resnet" network kind and zero-sum games of more than two players.
"""

from __future__ import annotations

from typing import Dict, Tuple, Union

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx
import optax

import envs
from anakin_mz.core.loss import LossConfig, l2_norm_squared, value_loss
from anakin_mz.core.networks import (
  NetworkConfig,
  _ConvRepresentation,
  _dense,
  _fill_params,
  _min_max,
  _MLP,
  _MLPRepresentation,
  head_to_scalar,
  input_shape,
  scale_gradient,
)
from anakin_mz.core import act
from anakin_mz.core.replay.buffer import lane_get
from anakin_mz.core.replay.sampling import Starts, past_end_actions, sample_starts
from anakin_mz.core.replay.targets import Prepared, backward_sums
from anakin_mz.runtime import mesh as mesh_lib
from anakin_mz.core import registry
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.agents.smz_expectimax import smz_expectimax
from anakin_mz.core.search import SearchConfig, SearchOutput, add_root_noise, search_output
from anakin_mz.core.types import ModelOutput, Params

NUM_TURN = 2  # turn head classes: 0 the same mover, 1 another mover


@chex.dataclass(frozen=True)
class SMZUnroll:
  """`StochasticNetwork.unroll` along K decision steps. V is 1 for scalar
  heads, else the support size; C the number of codes.

  Attributes:
    value_logits: `[N, K+1, V]` value of the states at depths 0..K.
    policy_logits: `[N, K+1, A]` policy at depths 0..K.
    q_logits: `[N, K, V]` value of the afterstates at depths 0..K-1.
    sigma_logits: `[N, K, C]` code prior of the afterstates.
    reward_logits: `[N, K, V]` reward of the chance step into depths 1..K.
    turn_logits: `[N, K, 2]` turn head of the chance step into depths 1..K.
    code: `[N, K, C]` the encoder's code of depths 1..K (one-hot forward,
      softmax gradient).
    code_probs: `[N, K, C]` the encoder's softmax.
  """

  value_logits: chex.Array
  policy_logits: chex.Array
  q_logits: chex.Array
  sigma_logits: chex.Array
  reward_logits: chex.Array
  turn_logits: chex.Array
  code: chex.Array
  code_probs: chex.Array


def straight_through_code(logits: chex.Array) -> Tuple[chex.Array, chex.Array]:
  """`[..., C]` encoder logits -> (the one-hot of their argmax, forward, with
  the softmax's gradient, backward; the softmax)."""
  probs = jax.nn.softmax(logits)
  one_hot = jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=probs.dtype)
  return probs + jax.lax.stop_gradient(one_hot - probs), probs


class _Heads(nn.Module):
  """`_MLP` on the concatenated inputs, then one dense head per size; the
  first head is a latent (min-max scaled if `normalize`) when `latent`."""

  hidden: Tuple[int, ...]
  sizes: Tuple[int, ...]
  latent: bool = False
  normalize: bool = True

  @nn.compact
  def __call__(self, *inputs):
    x = jnp.concatenate([i.reshape((i.shape[0], -1)) for i in inputs], axis=-1)
    x = _MLP(self.hidden)(x)
    outs = [_dense(size)(x) for size in self.sizes]
    if self.latent and self.normalize:
      outs[0] = _min_max(outs[0])
    return tuple(outs)


class StochasticNetwork:
  """h, f, phi, psi, g and e for one env (module docstring). Pure and
  jittable in `params` and the arrays; the object itself is static."""

  def __init__(self, env: envs.Env, config: NetworkConfig = NetworkConfig()):
    if config.kind not in ("mlp", "conv"):
      raise ValueError(
        f"agent stochastic_muzero needs network.kind mlp or conv, got {config.kind!r}"
      )
    self.config = config
    self.num_players = env.num_players
    self.num_actions = env.num_actions
    self.num_codes = config.chance_codes or env.num_chance_outcomes
    self.flip = env.payoff == "zero_sum"
    self.observation_shape = tuple(env.observation_shape)
    self._input_shape = input_shape(env, config.kind)
    c, d, v = config, config.latent_dim, config.value_size
    self._h = (_MLPRepresentation if c.kind == "mlp" else _ConvRepresentation)(c)
    self._f = _Heads(c.hidden, (self.num_actions, v))
    self._phi = _Heads(c.hidden, (d,), latent=True, normalize=c.normalize_latent)
    self._psi = _Heads(c.hidden, (v, self.num_codes))
    self._g = _Heads(c.hidden, (d, v, NUM_TURN), latent=True, normalize=c.normalize_latent)
    self._e = _Heads(c.hidden, (self.num_codes,))

  # Parameters.
  def init(self, key: chex.PRNGKey) -> Params:
    """Fresh parameters: kernels LeCun normal, biases 0 (one normal draw for
    all kernels, as `networks.Network.init`)."""
    shapes = jax.eval_shape(self._flax_init, jax.random.PRNGKey(0))
    return jax.jit(lambda k: _fill_params(shapes, k))(key)

  def _flax_init(self, key: chex.PRNGKey) -> Params:
    keys = jax.random.split(key, 6)
    obs = self._prepare(jnp.zeros((1,) + self.observation_shape, jnp.float32))
    s = jnp.zeros((1, self.config.latent_dim), jnp.float32)
    a = jnp.zeros((1, self.num_actions), jnp.float32)
    code = jnp.zeros((1, self.num_codes), jnp.float32)
    return {
      "h": self._h.init(keys[0], obs),
      "f": self._f.init(keys[1], s),
      "phi": self._phi.init(keys[2], s, a),
      "psi": self._psi.init(keys[3], s),
      "g": self._g.init(keys[4], s, code),
      "e": self._e.init(keys[5], obs),
    }

  def _prepare(self, observation: chex.Array) -> chex.Array:
    observation = jnp.asarray(observation, jnp.float32)
    return observation.reshape(observation.shape[:1] + self._input_shape)

  # The six functions.
  def represent(self, params: Params, observation: chex.Array) -> chex.Array:
    """h: `[B, *obs]` -> state `[B, D]`."""
    return self._h.apply(params["h"], self._prepare(observation))

  def predict(self, params: Params, state: chex.Array) -> Tuple[chex.Array, chex.Array]:
    """f: state -> (policy logits `[B, A]`, value logits `[B, V]`)."""
    return self._f.apply(params["f"], state)

  def afterstate(self, params: Params, state: chex.Array, action: chex.Array) -> chex.Array:
    """phi: state `[B, D]`, player action `[B]` -> afterstate `[B, D]`."""
    one_hot = jax.nn.one_hot(action, self.num_actions, dtype=state.dtype)
    return self._phi.apply(params["phi"], state, one_hot)[0]

  def afterstate_predict(self, params: Params, afterstate: chex.Array):
    """psi: afterstate -> (Q logits `[B, V]`, code prior logits `[B, C]`)."""
    return self._psi.apply(params["psi"], afterstate)

  def dynamics(self, params: Params, afterstate: chex.Array, code: chex.Array):
    """g: afterstate `[B, D]`, code `[B, C]` (one-hot) -> (state `[B, D]`,
    reward logits `[B, V]`, turn logits `[B, 2]`)."""
    return self._g.apply(params["g"], afterstate, code)

  def encode(self, params: Params, observation: chex.Array) -> Tuple[chex.Array, chex.Array]:
    """e: `[B, *obs]` -> (straight-through code `[B, C]`, softmax `[B, C]`)."""
    return straight_through_code(self._e.apply(params["e"], self._prepare(observation))[0])

  def to_scalar(self, logits: chex.Array) -> chex.Array:
    """`[..., V]` value/reward head output -> `[...]` scalars."""
    return head_to_scalar(logits, self.config)

  # The search.
  def root(self, params: Params, observation: chex.Array) -> ModelOutput:
    """h then f on `[B, *obs]` as a `types.ModelOutput` (what the greedy
    policy, `play.py` and the search read: policy, value, embedding)."""
    state = self.represent(params, observation)
    policy, value = self.predict(params, state)
    batch = policy.shape[0]
    return ModelOutput(
      reward=jnp.zeros((batch,), jnp.float32),
      value=self.to_scalar(value),
      policy_logits=policy,
      chance_logits=jnp.zeros((batch, self.num_codes), jnp.float32),
      identity_logits=jnp.zeros((batch, self.num_players + 2), jnp.float32),
      embedding=state,
    )

  def decision_recurrent(self, params: Params, rng_key, action, state):
    """mctx's `DecisionRecurrentFn`: phi then psi."""
    del rng_key
    afterstate = self.afterstate(params, state, action)
    q, sigma = self.afterstate_predict(params, afterstate)
    out = mctx.DecisionRecurrentFnOutput(chance_logits=sigma, afterstate_value=self.to_scalar(q))
    return out, afterstate

  def chance_recurrent(self, params: Params, rng_key, code, afterstate, *, discount: float):
    """mctx's `ChanceRecurrentFn`: g then f. The edge's discount is
    `discount`, negated where the turn head says the mover changes in a
    zero-sum game (module docstring)."""
    del rng_key
    one_hot = jax.nn.one_hot(code, self.num_codes, dtype=afterstate.dtype)
    state, reward, turn = self.dynamics(params, afterstate, one_hot)
    policy, value = self.predict(params, state)
    changes = self.flip & (jnp.argmax(turn, axis=-1) == 1)
    out = mctx.ChanceRecurrentFnOutput(
      action_logits=policy,
      value=self.to_scalar(value),
      reward=self.to_scalar(reward),
      discount=jnp.where(changes, -discount, discount).astype(state.dtype),
    )
    return out, state

  # Training.
  def unroll(
    self,
    params: Params,
    observation: chex.Array,
    actions: chex.Array,
    next_observation: chex.Array,
  ) -> SMZUnroll:
    """h, then K steps of phi, psi, e, g and f along `actions` `[N, K]`, the
    encoder reading `next_observation` `[N, K, *obs]`. The state's gradient
    is scaled by `config.dynamics_grad_scale` as it enters each step (as
    `networks.Network.unroll`)."""
    n, k = actions.shape
    state = self.represent(params, observation)
    policy0, value0 = self.predict(params, state)
    flat = next_observation.reshape((n * k,) + next_observation.shape[2:])
    code, probs = self.encode(params, flat)
    code = code.reshape((n, k, -1))
    probs = probs.reshape((n, k, -1))
    scale = self.config.dynamics_grad_scale

    def step(state, inputs):
      action, code = inputs
      afterstate = self.afterstate(params, scale_gradient(state, scale), action)
      q, sigma = self.afterstate_predict(params, afterstate)
      state, reward, turn = self.dynamics(params, afterstate, code)
      policy, value = self.predict(params, state)
      return state, (q, sigma, reward, turn, policy, value)

    xs = (jnp.swapaxes(actions.astype(jnp.int32), 0, 1), jnp.swapaxes(code, 0, 1))
    _, (q, sigma, reward, turn, policy, value) = jax.lax.scan(step, state, xs)
    batch_major = lambda x: jnp.swapaxes(x, 0, 1)
    first = lambda x0, xs: jnp.concatenate([x0[:, None], batch_major(xs)], axis=1)
    return SMZUnroll(
      value_logits=first(value0, value),
      policy_logits=first(policy0, policy),
      q_logits=batch_major(q),
      sigma_logits=batch_major(sigma),
      reward_logits=batch_major(reward),
      turn_logits=batch_major(turn),
      code=code,
      code_probs=probs,
    )


def smz_search(
  params: Params,
  rng_key: chex.PRNGKey,
  network: StochasticNetwork,
  observation: chex.Array,
  legal_action_mask: chex.Array,
  *,
  config: SearchConfig,
  temperature: Union[float, chex.Array],
) -> SearchOutput:
  """`mctx.stochastic_muzero_policy` from the decision states observed as
  `observation` `[B, *obs]` with legal moves `legal_action_mask` `[B, A]`.

  The root noise and the move are the NDMZ search's (`search.add_root_noise`,
  `search.select_action`; mctx's own noise is off and its move unused). Of
  `config` it reads num_simulations, max_depth, the Dirichlet settings,
  pb_c_init, pb_c_base and discount. Returns a `SearchOutput` whose tree is
  mctx's, masked to the A decision slots (`search_tree.embeddings` is an
  `mctx.StochasticRecurrentState`).
  """
  k_action, k_noise, k_search = jax.random.split(rng_key, 3)
  legal = legal_action_mask.astype(bool)
  root = network.root(params, observation)
  prior_logits = add_root_noise(k_noise, root.policy_logits, legal, config)
  out = mctx.stochastic_muzero_policy(
    params,
    k_search,
    mctx.RootFnOutput(prior_logits=prior_logits, value=root.value, embedding=root.embedding),
    network.decision_recurrent,
    lambda p, k, c, a: network.chance_recurrent(p, k, c, a, discount=config.discount),
    num_simulations=config.num_simulations,
    invalid_actions=jnp.logical_not(legal),
    max_depth=config.max_depth,
    dirichlet_fraction=0.0,
    pb_c_init=config.pb_c_init,
    pb_c_base=config.pb_c_base,
  )
  return search_output(k_action, out.search_tree, root.policy_logits, legal, temperature)


def smz_loss(
  params: Params, network: StochasticNetwork, batch: DecisionBatch, config: LossConfig
) -> Tuple[chex.Array, Dict[str, chex.Array]]:
  """The Stochastic MuZero loss on a `DecisionBatch` (module
  docstring). Returns (loss `[]`, metrics: the terms, `l2`, `total`,
  `turn_accuracy` and `code_usage`, the share of codes some sample used)."""
  out = network.unroll(params, batch.observation, batch.actions, batch.next_observation)
  head, support = network.config.value_head, network.config.support_size
  mean = lambda x: jnp.mean(jnp.sum(x, axis=-1))
  k = batch.actions.shape[1]
  code = jax.lax.stop_gradient(out.code)
  terms = {
    "value": mean(value_loss(out.value_logits, batch.target_value, head, support)),
    "q": mean(value_loss(out.q_logits, batch.target_value[:, :k], head, support)),
    "reward": mean(value_loss(out.reward_logits, batch.target_reward, head, support)),
    "policy": mean(
      jnp.where(
        batch.policy_mask, optax.softmax_cross_entropy(out.policy_logits, batch.target_policy), 0.0
      )
    ),
    "sigma": mean(optax.softmax_cross_entropy(out.sigma_logits, code)),
    "commitment": mean(jnp.sum(jnp.square(code - out.code_probs), axis=-1)),
    "turn": mean(
      optax.softmax_cross_entropy_with_integer_labels(out.turn_logits, batch.target_turn)
    ),
  }
  l2 = config.l2 * l2_norm_squared(params)
  loss = (
    config.value_weight * (terms["value"] + terms["q"])
    + config.reward_weight * terms["reward"]
    + config.policy_weight * terms["policy"]
    + config.chance_weight * terms["sigma"]
    + config.commitment_weight * terms["commitment"]
    + config.identity_weight * terms["turn"]
    + l2
  )
  hits = jnp.argmax(out.turn_logits, axis=-1) == batch.target_turn
  used = jnp.any(code.reshape((-1, code.shape[-1])) > 0.5, axis=0)
  metrics = dict(terms, l2=l2, total=loss, turn_accuracy=jnp.mean(hits), code_usage=jnp.mean(used))
  return loss, metrics


# ------------------------------------ replay: decision-to-decision unrolls


@chex.dataclass(frozen=True)
class DecisionBatch:
  """N training samples of a K-step unroll over *decision* steps (Stochastic
  MuZero's, this module's): step k goes from the k-th decision
  d_k of the sample to the next one, d_{k+1}, through every chance node in
  between. Past the episode's end: value, reward and turn 0, policy masked,
  a uniformly random player action and an all-zero next observation.

  Attributes:
    observation: `[N, *obs]` at d_0, the sampled start.
    actions: int32 `[N, K]` the player action taken at d_k.
    next_observation: `[N, K, *obs]` the observation at d_{k+1} (the input
      of the chance-code encoder); all zeros where the episode ended first.
    target_value: `[N, K+1]` value target at d_k, from d_k's mover's view.
    target_reward: `[N, K]` rewards from d_k up to d_{k+1} (or the end),
      discounted per transition, from d_k's mover's view.
    target_policy: `[N, K+1, A]` search visits at d_k; policy_mask `[N, K+1]`
      bool (d_k is before the episode's end).
    target_turn: int32 `[N, K]` 1 where the mover at d_{k+1} is not d_k's
      mover, else 0 (the episode ended first: 0).
  """

  observation: chex.Array
  actions: chex.Array
  next_observation: chex.Array
  target_value: chex.Array
  target_reward: chex.Array
  target_policy: chex.Array
  policy_mask: chex.Array
  target_turn: chex.Array


@chex.dataclass(frozen=True)
class DecisionPrepared:
  """The whole-buffer facts `sample_decisions` draws from (`prepare_decisions`).

  Attributes:
    base: the transition-level `Prepared` (values, segments, slots).
    next_decision: int32 `[L, B]` logical order: the first decision step
      after each step (L: none in the lane's data).
    reward_to_next: float32 `[L, B, P]`: rewards from each step up to the
      next decision step or the end of its segment, discounted per
      transition, per absolute player.
    start_ok: bool `[L, B]`: decision steps whose K next decisions are known
      (or whose episode ends first).
  """

  base: Prepared
  next_decision: chex.Array
  reward_to_next: chex.Array
  start_ok: chex.Array


def prepare_decisions(prepared: Prepared, *, K: int, discount: float = 1.0) -> DecisionPrepared:
  """The decision-to-decision facts of the buffer `prepared` was derived from
  (O(K L B) gathers and one parallel scan), on top of `prepared`'s own
  segment ends and next decisions."""
  buffer = prepared.buffer
  cap = buffer.capacity
  time = jnp.broadcast_to(jnp.arange(cap)[:, None], prepared.valid.shape)
  never = jnp.int32(cap)
  next_decision = prepared.decision_after
  # A chain of decisions stays in its segment: a later one belongs to the
  # next episode (or is unknown).
  chain = time
  for _ in range(K):
    chain = jnp.where(
      chain < cap, jnp.take_along_axis(next_decision, jnp.minimum(chain, cap - 1), axis=0), never
    )
  start_ok = prepared.decision & (prepared.done_at_end | (chain <= prepared.end))
  # Rewards up to the next decision: the recurrence stops before a decision
  # step and at the segment's end.
  valid_next = jnp.concatenate([prepared.valid[1:], jnp.zeros_like(prepared.valid[:1])])
  decision_next = jnp.concatenate([prepared.decision[1:], jnp.zeros_like(prepared.decision[:1])])
  goes_on = prepared.valid & valid_next & ~decision_next & (prepared.end > time)
  rewards = jnp.where(prepared.valid[..., None], lane_get(buffer.data.rewards, prepared.phys), 0.0)
  reward_to_next = backward_sums(jnp.where(goes_on, discount, 0.0)[..., None], rewards)
  return DecisionPrepared(
    base=prepared, next_decision=next_decision, reward_to_next=reward_to_next, start_ok=start_ok
  )


def sample_decisions(
  dprepared: DecisionPrepared,
  key: chex.PRNGKey,
  batch_size: int,
  *,
  K: int,
  num_actions: int,
  shard: chex.Numeric = 0,
  num_shards: int = 1,
) -> DecisionBatch:
  """`batch_size` starts drawn (stratified by lane, `sample_starts`; sharded
  as `sample_prepared`) among `dprepared.start_ok`, and their K-step
  decision unrolls (`DecisionBatch`)."""
  prepared = dprepared.base.replace(start_ok=dprepared.start_ok)
  starts = sample_starts(prepared, key, batch_size, shard=shard, num_shards=num_shards)
  return decisions_at(dprepared, starts, batch_size=batch_size, K=K, num_actions=num_actions)


def decisions_at(
  dprepared: DecisionPrepared,
  starts: Starts,
  *,
  batch_size: int,
  K: int,
  num_actions: int,
) -> DecisionBatch:
  """The `DecisionBatch` of `starts` (rows of a batch of `batch_size`).
  Meaningful where `dprepared.start_ok[starts.i, starts.lane]`."""
  if K < 0:
    raise ValueError(f"need K >= 0, got {K}")
  i, lane = starts.i, starts.lane
  prepared = dprepared.base
  data = prepared.buffer.data
  cap = prepared.buffer.capacity
  n = i.shape[0]
  end = prepared.end[i, lane]  # [N]
  times, alive = [i], [jnp.ones((n,), jnp.bool_)]
  for _ in range(K):
    nxt = dprepared.next_decision[jnp.minimum(times[-1], cap - 1), lane]
    alive.append(alive[-1] & (nxt <= end))
    times.append(nxt)
  pos = jnp.minimum(jnp.stack(times, axis=1), cap - 1)  # [N, K+1] logical times
  alive = jnp.stack(alive, axis=1)
  lane_k = lane[:, None]
  slot = prepared.phys[pos, lane_k]
  player = jnp.maximum(data.player[slot, lane_k], 0)  # a decision's mover where alive
  mine = lambda x: jnp.take_along_axis(x, player[..., None], axis=-1)[..., 0]
  value = mine(prepared.values[pos, lane_k])
  reward = mine(dprepared.reward_to_next[pos, lane_k])[:, :K]
  random_actions = past_end_actions(starts, batch_size, K, num_actions)
  actions = jnp.where(alive[:, :K], data.action[slot[:, :K], lane_k], random_actions)
  next_alive = alive[:, 1:]
  obs = data.observation[slot[:, 1:], lane_k]
  next_obs = jnp.where(next_alive.reshape(next_alive.shape + (1,) * (obs.ndim - 2)), obs, 0.0)
  turn = next_alive & (player[:, 1:] != player[:, :K])
  batch = DecisionBatch(
    observation=data.observation[slot[:, 0], lane],
    actions=actions.astype(jnp.int32),
    next_observation=next_obs,
    target_value=jnp.where(alive, value, 0.0),
    target_reward=jnp.where(alive[:, :K], reward, 0.0),
    target_policy=jnp.where(alive[..., None], data.search_policy[slot, lane_k], 0.0),
    policy_mask=alive,
    target_turn=turn.astype(jnp.int32),
  )
  chex.assert_shape([batch.actions, batch.target_reward, batch.target_turn], (n, K))
  chex.assert_shape([batch.target_value, batch.policy_mask], (n, K + 1))
  chex.assert_shape(batch.next_observation, (n, K) + data.observation.shape[2:])
  return batch


# ------------------------------------------------------------ the agent


def search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  model: StochasticNetwork,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """Stochastic MuZero's `act.SearchFn`: `smz_search` from the observations
  of the batched states `state` `[B]`."""
  del env
  mask = act.decision_mask(state)
  if config.root == "expectimax":  # the play search (`play_search`; self-play's is refused)
    return smz_expectimax(params, key, model, state.observation, mask, config=config)
  return smz_search(
    params, key, model, state.observation, mask, config=config, temperature=temperature
  )


class StochasticMuZeroLearner(Learner):
  """The Anakin learner with Stochastic MuZero's model (self-play runs
  `search` on it) and loss, on K-step unrolls over decision steps
  (`sample_decisions`)."""

  READS_SIBLINGS = False  # its own loss does not read the sibling term

  def _prepare(self, buffer):
    prepared = super()._prepare(buffer)
    return prepare_decisions(
      prepared, K=self.config.train.unroll_steps, discount=self.config.discount
    )

  def _sample(self, params, prepared, key):
    del params  # no reanalyse (`check` refuses it)
    tc = self.config.train
    return sample_decisions(
      prepared,
      key,
      tc.batch_size,
      K=tc.unroll_steps,
      num_actions=self.env.num_actions,
      shard=mesh_lib.shard_index(),
      num_shards=self.num_devices,
    )

  def _loss(self, params, batch):
    return smz_loss(params, self.network, batch, self.config.loss)


def check(config) -> None:
  """What this module does not implement, refused."""
  unsupported = {
    "search.root other than puct (self-play searches with "
    "mctx.stochastic_muzero_policy's PUCT)": config.search.root != "puct",
    "play_search.root gumbel (it plays with PUCT or expectimax)": (
      config.playing_search.root == "gumbel"
    ),
    "search.tree: paper (the NDMZ paper's tree; it searches with "
    "mctx.stochastic_muzero_policy's)": config.search.tree != "ndmz",
    "train.reanalyse_fraction > 0": config.train.reanalyse_fraction > 0,
    "network.kind: resnet (use mlp or conv)": config.network.kind == "resnet",
  }
  bad = [name for name, refused in unsupported.items() if refused]
  if bad:
    raise ValueError(f"agent stochastic_muzero does not support {'; '.join(bad)}")


AGENT = registry.register(
  registry.AgentSpec(
    name="stochastic_muzero",
    learner=StochasticMuZeroLearner,
    model=lambda config, env: StochasticNetwork(env, config.network),
    greedy=act.root_greedy,
    value=act.root_value,
    search=search,
    capabilities=registry.Capabilities(learned_model=True, two_sided_value=True),
    check=check,
  )
)
