"""The NDMZ training loss, eq. (1) of the paper:

    l_t = sum_{k=0..K} l^r(u_{t+k}, r^k) + l^v(z_{t+k}, v^k) + l^p(pi_{t+k}, p^k)
                      + l^c(psi_{t+k}, c^k) + l^i(iota_{t+k}, i^k)  + c ||theta||^2

* reward l^r (k = 1..K, from g) and value l^v (k = 0..K, from f): squared
  error for scalar heads; for categorical heads, cross-entropy to the two-hot
  of h(target) (`value_transform`, MooZi 4.3.5/4.3.8).
* choice policy l^p: cross-entropy to the search visits where a player
  moved (`policy_mask`).
* chance policy l^c: cross-entropy to the game's chance probabilities at
  chance steps (`chance_mask`).
* off turn (the choice head where no player moves: chance and terminal
  states and past the episode's end; the chance head where chance does not
  act), by default no loss. With a network that has the paper's no-op action
  (`NetworkConfig.noop_action`), the target there is the no-op, as the paper
  trains it (3.2: "We use the no-op action as a training target for the
  choice policy and chance policy when it is not that player's turn to
  move"): each head's cross-entropy runs over its actions and the no-op,
  with target one-hot no-op off turn and the visits (chance probabilities)
  with no-op 0 on turn.
* identity l^i (k = 1..K, from g): cross-entropy to the true next mover
  (relative player, chance or terminal).
* L2: `l2 * sum of squared kernels` (biases and norm scales are not decayed).

Like the paper (4.2), the terms are summed over k (no 1/K); the batch mean is
taken over samples. The gradient halving into each dynamics step lives in
`Network.unroll`.

An optional sixth term, off by default (not in the paper), is the successor
value l^s (`successor_value_weight`, `successor_value_loss`): at each unrolled
step k >= 1 that is a decision step of the episode, the model's value
f(g^k(h(o_t), ...)) is regressed on the network's own value of the real
observation there, f(h(o_{t+k})) turned to the root mover's view, with the
gradient stopped on that target. Why: the search plays on values reached
through g, and on Nannon those are much worse than f(h(.)) on the same real
positions (`docs/results/strength.md`); the term teaches g to land where h
would, with a lower-variance target than the game's outcome.

A seventh, off by default, is EfficientZero's temporal consistency l^z
(`consistency_weight`, `consistency_loss`; Ye et al. 2021, 3.3, without its
projection and prediction heads): at the same decision steps k >= 1, one
minus the cosine between the latent g reached, g^k(h(o_t), ...), and the
latent of the real observation there, h(o_{t+k}), gradient stopped. Where the
successor value aligns one number, this aligns the whole hidden state, so
every head f reads at an imagined state (the value, and the priors the
search follows) reads what it would at the real one. Why: at 12,000 updates
on 6-3-6 the same network in the true-model tree plays at its value head's
1-ply, and on its learned model 0.02 below it (`docs/results/planning.md`).

An eighth, off by default, is observation reconstruction l^o
(`reconstruction_weight`, `reconstruction_loss`; the decoder of
`NetworkConfig.decoder`): the mean squared error of d(s^k) against the real
observation, at depth 0 (h's latent, o_t) and at the unrolled decision steps
k >= 1 (o_{t+k}). Why: the values g's latents carry are trained only along
the moves self-play took; on 6-3-6 the learned model values the moves the
policy rarely takes far worse than the value head values their real
successors (`planning.md`, E7). A latent that must also reproduce the board
makes g learn the game's move mechanics, which every move shares (a
self-supervised world-model loss, as in Anand et al. 2021 for MuZero).

A ninth, off by default, is the sibling value l^b (`sibling_value_weight`,
`sibling_value_loss`): at the start step t, for *every* legal move a (not
only the one self-play took), the model's one-step value of the move,
r^1 + discount * v^1 of g(h(o_t), a), is regressed on the move's value one
ply deep on the real game by the network's own value head,
`reward + discount * sum_c p_c f(h(o'_c))` over the chance that follows
(what `--player value` ranks the moves by), recorded by self-play with the
parameters of that time (`Transition.sibling_q`, `lookahead.siblings`);
the squared errors are averaged over the legal moves. Why: the learned
model's values of the moves self-play rarely takes are the worst it has
(1.7-2.7x the value head's error on the real successors, biased upwards;
`planning.md`, E7), and those are the values a search compares at its
root; the value head's own one-ply values of them are good (the value
player beats the search). The term needs a game the value player can look
ahead on (`registry.LOOKAHEAD`); it costs the lookahead in self-play (about
`max_legal_actions * (1 + C)` calls of h and f per decision, C =
`env.max_chance_outcomes`) and `S` more
steps of g and f per sample. With `sibling_steps: all` it trains the same
at every unrolled decision step t+k, on the latent the unroll reached
there, with transition t+k's recorded moves and values (self-play records
them at every decision): a search deeper than one move compares the
model's values of the opponent's replies k steps into its imagined tree,
which the start step alone never trains. That costs `(K+1) S` steps of g
and f per sample instead of `S`.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Tuple

import chex
import jax
import jax.numpy as jnp
import optax

from anakin_mz.core import lookahead, value_transform
from anakin_mz.core.checks import is_int
from anakin_mz.core.networks import Network, scale_gradient
from anakin_mz.core.replay import Batch, check_batch
from anakin_mz.core.types import Params, UnrollOutput


# The unrolled steps the sibling-value term can train (`LossConfig.sibling_steps`).
SIBLING_STEPS = ("start", "all")


@dataclasses.dataclass(frozen=True)
class LossConfig:
  """Weights of the terms of eq. (1) (hashable, static).

  Attributes:
    value_weight, reward_weight, policy_weight, chance_weight,
    identity_weight: multipliers of each term (all 1 in the paper).
    successor_value_weight: multiplier of the successor-value term (module
      doc; 0, the paper's loss, skips it and its cost). Like the reward,
      chance and identity weights it trains NDMZ's learned model: agents
      without one (alphazero, tdlambda) and stochastic_muzero do not read
      it, so one game config serves every agent (`scripts/compare.py`).
    consistency_weight: multiplier of the temporal-consistency term
      (module doc; 0 skips it), read like the successor value's.
    reconstruction_weight: multiplier of the reconstruction term (module
      doc; 0 skips it; > 0 needs `network.decoder`), read like the
      successor value's.
    sibling_value_weight: multiplier of the sibling-value term (module doc;
      0 skips it and its self-play lookahead), read like the successor
      value's.
    sibling_steps: the unrolled steps the sibling-value term trains (one of
      `SIBLING_STEPS`): "start", the start step's latent h(o_t) alone (the
      term as first measured, `planning.md` E8), or "all", every step k =
      0..K that is a decision step of the episode, on the unroll's latent
      there (`sibling_value_loss`). "all" with `sibling_value_weight` 0 is
      refused: it would train nothing.
    sibling_depth: the moves of the real-game expectimax whose value each
      sibling's target is (`lookahead.expectimax_policy`'s `depth`, 1..3):
      1, the value head's one ply (the term as first measured); 2 also tries
      every reply to every chance outcome, a target above the one-ply
      player's own values (the value head two moves deep plays better than
      one move, `planning.md` E9), so the model's one move can learn more
      than the value head's one ply. Its self-play cost grows with the
      replies times the outcomes: on Nannon 6-3-6's config, 2 trains at
      0.45 of 1's updates per second on one core (5.8 against 13.0, a
      same-host pair; a tenth before the lookahead kept only a chance
      node's possible outcomes, `planning.md` E15); `sibling_lane_stride`
      thins it. > 1 with `sibling_value_weight` 0 is refused: it would
      train nothing.
    sibling_lane_stride: self-play records the siblings in one lane of
      every `sibling_lane_stride` (lanes 0, s, 2s, ... of each device's
      block; 1, the default: every lane), the others record none. What it
      buys: the lookahead's self-play cost divided by the stride (at
      `sibling_depth` 2 that cost is most of a step). The term averages over
      the batch with a start of no recorded moves counted 0, so a stride of
      s weighs the term about `sibling_value_weight / s`: multiply the
      weight by s to keep it. > 1 with `sibling_value_weight` 0 is refused.
    l2: c, the L2 coefficient on the kernels.
    commitment_weight: agent stochastic_muzero's chance-code commitment
      term (`anakin_mz.agents.stochastic_muzero`; it also reads the others).
  """

  value_weight: float = 1.0
  reward_weight: float = 1.0
  policy_weight: float = 1.0
  chance_weight: float = 1.0
  identity_weight: float = 1.0
  successor_value_weight: float = 0.0
  consistency_weight: float = 0.0
  reconstruction_weight: float = 0.0
  sibling_value_weight: float = 0.0
  sibling_steps: str = "start"
  sibling_depth: int = 1
  sibling_lane_stride: int = 1
  l2: float = 1e-4
  commitment_weight: float = 1.0

  def __post_init__(self):
    for f in dataclasses.fields(self):
      if f.name != "sibling_steps" and float(getattr(self, f.name)) < 0:
        raise ValueError(f"loss {f.name} must be >= 0, got {getattr(self, f.name)}")
    if self.sibling_steps not in SIBLING_STEPS:
      raise ValueError(
        f"loss sibling_steps must be one of {', '.join(SIBLING_STEPS)}, got {self.sibling_steps!r}"
      )
    depth = self.sibling_depth
    if not is_int(depth) or not 1 <= depth <= 3:
      raise ValueError(f"loss sibling_depth must be an int in 1..3, got {depth!r}")
    stride = self.sibling_lane_stride
    if not is_int(stride) or stride < 1:
      raise ValueError(f"loss sibling_lane_stride must be an int >= 1, got {stride!r}")
    # A sibling setting off its default does nothing with the term off: refused.
    defaults = {f.name: f.default for f in dataclasses.fields(LossConfig)}
    for name, does in (
      ("sibling_depth", "sets the sibling-value term's targets"),
      ("sibling_lane_stride", "thins the sibling-value term's records"),
      ("sibling_steps", "trains the sibling-value term at every unrolled step"),
    ):
      value = getattr(self, name)
      if value != defaults[name] and self.sibling_value_weight == 0:
        raise ValueError(
          f"loss {name}={value!r} {does}, which sibling_value_weight 0 turns off: "
          f"set sibling_value_weight > 0 (or {name}={defaults[name]})"
        )


def value_loss(
  pred: chex.Array, target: chex.Array, value_head: str, support_size: int
) -> chex.Array:
  """pred `[..., V]`, target `[...]` -> per-entry loss `[...]`."""
  if value_head == "scalar":
    return jnp.square(pred[..., 0] - target)
  probs = value_transform.scalar_to_categorical(target, support_size)
  return optax.softmax_cross_entropy(pred, jax.lax.stop_gradient(probs))


def loss_terms(
  outputs: UnrollOutput, batch: Batch, *, value_head: str = "scalar", support_size: int = 10
) -> Dict[str, chex.Array]:
  """The five model terms of eq. (1), each summed over k and averaged over
  the batch (scalars), plus `identity_accuracy`.

  Args:
    outputs: `Network.unroll` output, `[N, K(+1), ...]` (`UnrollOutput`).
    batch: the targets.
    value_head, support_size: how to read value/reward outputs.
  """
  n, k1 = batch.target_value.shape
  chex.assert_shape(outputs.value_logits, (n, k1, None))
  chex.assert_shape(outputs.reward_logits, (n, k1 - 1, None))
  chex.assert_shape(outputs.policy_logits, batch.target_policy.shape)
  chex.assert_shape(outputs.chance_logits, batch.target_chance.shape)
  chex.assert_shape(outputs.identity_logits, batch.target_identity.shape + (None,))
  chex.assert_shape([batch.target_reward, batch.target_identity], (n, k1 - 1))
  mean = lambda x: jnp.mean(jnp.sum(x, axis=-1))
  value = value_loss(outputs.value_logits, batch.target_value, value_head, support_size)
  reward = value_loss(outputs.reward_logits, batch.target_reward, value_head, support_size)
  policy = _policy_loss(
    outputs.policy_logits, outputs.policy_noop_logits, batch.target_policy, batch.policy_mask
  )
  chance = _policy_loss(
    outputs.chance_logits, outputs.chance_noop_logits, batch.target_chance, batch.chance_mask
  )
  identity = optax.softmax_cross_entropy_with_integer_labels(
    outputs.identity_logits, batch.target_identity
  )
  hits = jnp.argmax(outputs.identity_logits, -1) == batch.target_identity
  return {
    "value": mean(value),
    "reward": mean(reward),
    "policy": mean(policy),
    "chance": mean(chance),
    "identity": mean(identity),
    "identity_accuracy": jnp.mean(hits),
  }


def _policy_loss(logits, noop_logits, target, on_turn):
  """Per-entry `[N, K+1]` cross-entropy of a policy head: to `target` on
  turn, and off turn 0 (`noop_logits` None) or to the no-op."""
  if noop_logits is None:
    return jnp.where(on_turn, optax.softmax_cross_entropy(logits, target), 0.0)
  full = jnp.concatenate([logits, noop_logits[..., None]], axis=-1)
  full_target = jnp.concatenate(
    [jnp.where(on_turn[..., None], target, 0.0), (~on_turn)[..., None].astype(target.dtype)],
    axis=-1,
  )
  return optax.softmax_cross_entropy(full, full_target)


def _flat_successors(batch: Batch, weight: str) -> chex.Array:
  """The batch's `successor_observation` `[N, K, *obs]` as `[N * K, *obs]`,
  for the term `loss.<weight>` (an error where the batch has none)."""
  if batch.successor_observation is None:
    raise ValueError(
      f"loss.{weight} > 0 needs the batch's successor_observation "
      "(replay.sample fills it); this batch has none"
    )
  obs = batch.successor_observation
  return obs.reshape((obs.shape[0] * obs.shape[1],) + obs.shape[2:])


def successor_value_loss(
  params: Params, network: Network, value_logits: chex.Array, batch: Batch
) -> chex.Array:
  """The successor-value term (module doc), summed over k and averaged over
  the batch: `[]`.

  Args:
    params: the network's parameters (the target is computed with them, its
      gradient stopped).
    network: the network (its `payoff` decides the sign of an opponent's view).
    value_logits: `[N, K+1, V]`, `Network.unroll`'s values; depths 1..K are read.
    batch: with `successor_observation` `[N, K, *obs]` (`replay.sample`
      fills it); `policy_mask[:, 1:]` says which depths are decision steps,
      `target_identity` gives the relative player at each depth.
  """
  obs = _flat_successors(batch, "successor_value_weight")
  n, k = batch.target_identity.shape
  chex.assert_shape(value_logits, (n, k + 1, None))
  own_view = network.root(params, obs).value.reshape(n, k)  # each observation's mover's view
  # target_identity is the mover relative to the root mover (0): the one view rule.
  sign = lookahead.sign(batch.target_identity, 0, network.payoff == "zero_sum")
  target = jax.lax.stop_gradient(sign * own_view)
  cfg = network.config
  per_step = value_loss(value_logits[:, 1:], target, cfg.value_head, cfg.support_size)
  return jnp.mean(jnp.sum(jnp.where(batch.policy_mask[:, 1:], per_step, 0.0), axis=-1))


def consistency_loss(
  params: Params, network: Network, latents: chex.Array, batch: Batch
) -> chex.Array:
  """The temporal-consistency term (module doc), summed over k and averaged
  over the batch: `[]`.

  Args:
    params: the network's parameters (the target h(o_{t+k}) is computed with
      them, its gradient stopped).
    network: the network (its `represent`).
    latents: `[N, K, *latent]`, `Network.unroll`'s hidden states at depths 1..K.
    batch: with `successor_observation` `[N, K, *obs]`; `policy_mask[:, 1:]`
      says which depths are decision steps (the others cost 0).
  """
  obs = _flat_successors(batch, "consistency_weight")
  n, k = batch.target_identity.shape
  chex.assert_shape(latents, (n, k, ...))
  target = jax.lax.stop_gradient(network.represent(params, obs)).reshape(n, k, -1)
  pred = latents.reshape(n, k, -1)
  norms = jnp.linalg.norm(pred, axis=-1) * jnp.linalg.norm(target, axis=-1)
  cosine = jnp.sum(pred * target, -1) / jnp.maximum(norms, 1e-8)
  return jnp.mean(jnp.sum(jnp.where(batch.policy_mask[:, 1:], 1.0 - cosine, 0.0), axis=-1))


def reconstruction_loss(
  params: Params, network: Network, root_latent: chex.Array, latents: chex.Array, batch: Batch
) -> chex.Array:
  """The reconstruction term (module doc), summed over depths and averaged
  over the batch: `[]`. Each depth's error is the mean over the
  observation's features.

  Args:
    params: the network's parameters (with the decoder's, `"d"`).
    network: a network with a decoder (`NetworkConfig.decoder`).
    root_latent: `[N, *latent]`, h(o_t) (`UnrollOutput.root_latent`).
    latents: `[N, K, *latent]`, g's latents at depths 1..K.
    batch: its `observation` `[N, *obs]` and `successor_observation`
      `[N, K, *obs]`; `policy_mask[:, 1:]` says which depths 1..K are
      decision steps (the others cost 0).
  """
  obs = _flat_successors(batch, "reconstruction_weight")
  n, k = batch.target_identity.shape
  chex.assert_shape(latents, (n, k, ...))
  chex.assert_shape(root_latent, (n,) + latents.shape[2:])
  flat = lambda x: x.reshape(x.shape[0], -1).astype(jnp.float32)
  first = jnp.mean(jnp.square(network.decode(params, root_latent) - flat(batch.observation)), -1)
  pred = network.decode(params, latents.reshape((n * k,) + latents.shape[2:]))
  later = jnp.mean(jnp.square(pred - flat(obs)), -1).reshape(n, k)
  return jnp.mean(first + jnp.sum(jnp.where(batch.policy_mask[:, 1:], later, 0.0), axis=-1))


def sibling_value_loss(
  params: Params,
  network: Network,
  root_latent: chex.Array,
  batch: Batch,
  *,
  discount: float,
  latents: Optional[chex.Array] = None,
  steps: str = "start",
) -> chex.Array:
  """The sibling-value term (module doc): `[]`.

  With `steps="start"` (`LossConfig.sibling_steps`), at the start step
  alone: the squared errors are averaged over each start's legal moves
  (its slots with an action >= 0; a start with none counts 0) and then
  over the batch.

  With `steps="all"`, at every unrolled step k = 0..K where `policy_mask[:,
  k]` (t+k is a decision step of the episode): on the latent the unroll
  reached there (h(o_t) at k = 0, g's after k actions at k >= 1, as `f`'s
  values of the other terms read them), each legal move a of transition t+k
  is valued `r + discount * f(g(s^k, a))` and regressed on its recorded
  value, turned from the view of the mover at t+k to the start mover's
  (times -1 in a two-player zero-sum game where the relative player at k,
  `target_identity[:, k-1]`, is not 0; never in a single-player or
  collaborative one), as the batch's other targets are. The average: per
  step over its legal moves (a decision step with none counts 0), then per
  sample over its decision steps (k = 0 among them), then over the batch:
  every sample weighs the same whatever its number of decision steps, so
  the term (and its gradient) is the batch mean of a per-sample number, as
  the start-only one is, and splitting the batch over devices (the
  learner's `pmean` of per-device means) does not change it. A step that
  is no decision step (a chance step, past the episode's end) and a slot
  with action -1 cost 0 and are not counted. With K = 0 the two agree.

  Args:
    params: the network's parameters.
    network: the learned model (g, f; the gradient into g is scaled by
      `dynamics_grad_scale`, as in `Network.unroll`; its `payoff` decides
      the sign of an opponent's step).
    root_latent: `[N, *latent]`, h(o_t) (`UnrollOutput.root_latent`: the
      unroll's own, not computed again).
    batch: with `sibling_action` (-1: no move) and `sibling_q`, `[N, K+1,
      S]` (`replay.sample` fills them where the buffer keeps them; each
      step's mover's view) or, for "start" only, `[N, S]` (the start step's
      alone); "all" reads `policy_mask` and `target_identity` too.
    discount: the per-transition discount of the targets.
    latents: `[N, K, *latent]`, g's latents at depths 1..K
      (`UnrollOutput.latents`: no step of g is run again); read by "all".
    steps: "start" or "all" (`SIBLING_STEPS`).

  Raises:
    ValueError: the batch has no siblings; `steps` is not one of
      `SIBLING_STEPS`; "all" without every step's siblings or `latents`.
  """
  if batch.sibling_q is None:
    raise ValueError(
      "loss.sibling_value_weight > 0 needs the batch's sibling_q (a replay "
      "buffer built with example_transition(env, siblings=True)); this batch has none"
    )
  if steps not in SIBLING_STEPS:
    raise ValueError(f"sibling steps must be one of {', '.join(SIBLING_STEPS)}, got {steps!r}")
  if steps == "start":
    sib_action, sib_q = batch.sibling_action, batch.sibling_q
    if sib_q.ndim == 3:  # every step's: the start's is k = 0
      sib_action, sib_q = sib_action[:, 0], sib_q[:, 0]
    n = sib_q.shape[0]
    chex.assert_shape(root_latent, (n, ...))
    q = _one_step_values(params, network, root_latent, sib_action, discount)
    return jnp.mean(_mean_over_moves(q, sib_q, sib_action >= 0))
  if batch.sibling_q.ndim != 3 or latents is None:
    raise ValueError(
      "loss.sibling_steps=all needs every unrolled step's siblings, sibling_q [N, K+1, S] "
      "(replay.sample fills them), and the unroll's latents"
    )
  n, k1, slots = batch.sibling_q.shape
  chex.assert_shape(root_latent, (n, ...))
  chex.assert_shape(latents, (n, k1 - 1) + root_latent.shape[1:])
  chex.assert_shape([batch.policy_mask, batch.sibling_action], [(n, k1), (n, k1, slots)])
  every = jnp.concatenate([root_latent[:, None], latents], axis=1)  # [N, K+1, ...]
  q = _one_step_values(
    params,
    network,
    every.reshape((n * k1,) + every.shape[2:]),
    batch.sibling_action.reshape(n * k1, slots),
    discount,
  ).reshape(n, k1, slots)
  # The relative player at each step (0 at the start) turns step k's view
  # into the start mover's, the one view rule (`lookahead.sign`).
  rel = jnp.concatenate([jnp.zeros((n, 1), jnp.int32), batch.target_identity], axis=1)
  target = lookahead.sign(rel, 0, network.payoff == "zero_sum")[..., None] * batch.sibling_q
  decision = batch.policy_mask
  per_step = _mean_over_moves(q, target, (batch.sibling_action >= 0) & decision[..., None])
  per_sample = jnp.sum(jnp.where(decision, per_step, 0.0), -1) / jnp.maximum(
    jnp.sum(decision, -1), 1
  )
  return jnp.mean(per_sample)


def _mean_over_moves(q: chex.Array, target: chex.Array, valid: chex.Array) -> chex.Array:
  """`[...]`: the squared error of `q` against `target` (`[..., S]`) averaged
  over the slots `valid` marks (0 where none is valid)."""
  err = jnp.where(valid, jnp.square(q - target), 0.0)
  return jnp.sum(err, -1) / jnp.maximum(jnp.sum(valid, -1), 1)


def _one_step_values(
  params: Params, network: Network, latent: chex.Array, action: chex.Array, discount: float
) -> chex.Array:
  """`[M, S]`: the learned model's `r + discount * v` of g(`latent` `[M,
  ...]`, `action` `[M, S]`) (an action -1 is valued as 0, for the caller to
  mask), the gradient into g scaled as `Network.unroll` scales it."""
  m, slots = action.shape
  latent = scale_gradient(latent, network.config.dynamics_grad_scale)
  tiled = jnp.repeat(latent, slots, axis=0)  # [M * S, ...]
  actions = jnp.maximum(action, 0).reshape(m * slots)
  child, reward_logits, _ = network.dynamics(params, tiled, actions)
  value_logits = network.predict(params, child)[2]
  q = network.to_scalar(reward_logits) + discount * network.to_scalar(value_logits)
  return q.reshape(m, slots)


def l2_norm_squared(params: Params) -> chex.Array:
  """Sum of squares of every "kernel" leaf of `params`."""
  leaves = jax.tree_util.tree_flatten_with_path(params)[0]
  return sum(
    (jnp.sum(jnp.square(x)) for path, x in leaves if str(getattr(path[-1], "key", "")) == "kernel"),
    jnp.float32(0.0),
  )


def ndmz_loss(
  params: Params,
  network: Network,
  batch: Batch,
  config: LossConfig = LossConfig(),
  *,
  discount: float = 1.0,
) -> Tuple[chex.Array, Dict[str, chex.Array]]:
  """Eq. (1) on a batch. Returns (loss `[]`, metrics): the five terms (and
  `successor_value`, `consistency`, `reconstruction` and `sibling_value`
  where their weights are > 0), `l2` (the weighted penalty),
  `identity_accuracy` and `total`. `discount` is the config's, read by the
  sibling-value term.

  `batch` is a `replay.Batch` of N unrolls of K steps for `network`'s game:
  `observation` `[N, *obs]`, `actions` `[N, K]`, `target_policy`
  `[N, K+1, A]`, `target_chance` `[N, K+1, C]` (the rest as `Batch` gives
  them); a field of another shape is a chex AssertionError naming it."""
  check_batch(
    batch,
    observation_shape=network.observation_shape,
    num_actions=network.num_actions,
    num_chance=network.num_chance_outcomes,
  )
  outputs = network.unroll(params, batch.observation, batch.actions)
  terms = loss_terms(
    outputs, batch, value_head=network.config.value_head, support_size=network.config.support_size
  )
  if config.successor_value_weight > 0:
    terms["successor_value"] = successor_value_loss(params, network, outputs.value_logits, batch)
  if config.consistency_weight > 0:
    terms["consistency"] = consistency_loss(params, network, outputs.latents, batch)
  if config.reconstruction_weight > 0:
    if not network.config.decoder:
      raise ValueError("loss.reconstruction_weight > 0 needs network.decoder: true")
    terms["reconstruction"] = reconstruction_loss(
      params, network, outputs.root_latent, outputs.latents, batch
    )
  if config.sibling_value_weight > 0:
    terms["sibling_value"] = sibling_value_loss(
      params,
      network,
      outputs.root_latent,
      batch,
      discount=discount,
      latents=outputs.latents,
      steps=config.sibling_steps,
    )
  l2 = config.l2 * l2_norm_squared(params)
  loss = (
    config.value_weight * terms["value"]
    + config.reward_weight * terms["reward"]
    + config.policy_weight * terms["policy"]
    + config.chance_weight * terms["chance"]
    + config.identity_weight * terms["identity"]
    + config.successor_value_weight * terms.get("successor_value", 0.0)
    + config.consistency_weight * terms.get("consistency", 0.0)
    + config.reconstruction_weight * terms.get("reconstruction", 0.0)
    + config.sibling_value_weight * terms.get("sibling_value", 0.0)
    + l2
  )
  return loss, dict(terms, l2=l2, total=loss)
