"""Tests for anakin_mz.core.loss: exact numbers of each term on hand-set outputs,
masks honoured, L2, and the loss on a fixed Catch batch goes down with Adam."""

import functools

import chex

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import envs
import tiny
from anakin_mz import config as config_lib
from anakin_mz.core import replay, value_transform
from anakin_mz.core.loss import (
  LossConfig,
  consistency_loss,
  reconstruction_loss,
  l2_norm_squared,
  loss_terms,
  ndmz_loss,
  successor_value_loss,
)
from anakin_mz.core.networks import Network, NetworkConfig
from anakin_mz.core.types import ModelOutput, UnrollOutput

NB, K, A, C, P = 2, 2, 3, 2, 2


def _catch():
  return envs.make("catch", rows=4, columns=3)


# Compiled: eager dispatch of the many small ops costs more than one compile.
_jit_terms = jax.jit(loss_terms, static_argnames=("value_head", "support_size"))


def _terms(out, batch, **kwargs):
  """`loss_terms` on the head outputs `out` (a dict of `UnrollOutput` fields,
  edited in place by the tests)."""
  return _jit_terms(UnrollOutput(**out), batch, **kwargs)


def _batch(**over):
  b = dict(
    observation=jnp.zeros((NB, 1)),
    actions=jnp.zeros((NB, K), jnp.int32),
    target_value=jnp.array([[1.0, -0.5, 0.0], [0.25, 0.0, 0.0]]),
    target_reward=jnp.array([[0.0, 1.0], [2.0, 0.0]]),
    target_policy=jnp.array(
      [[[0.5, 0.5, 0.0], [0, 0, 0], [1 / 3] * 3], [[0.2, 0.3, 0.5], [0, 0, 0], [0, 0, 0]]]
    ),
    policy_mask=jnp.array([[True, False, True], [True, False, False]]),
    target_chance=jnp.array([[[0, 0], [0.5, 0.5], [0, 0]], [[0, 0], [0.75, 0.25], [0, 0]]]),
    chance_mask=jnp.array([[False, True, False], [False, True, False]]),
    target_identity=jnp.array([[2, 0], [3, 3]], jnp.int32),
  )
  b.update(over)
  return replay.Batch(**b)


def _zeros(v):
  return {
    "value_logits": jnp.zeros((NB, K + 1, v)),
    "reward_logits": jnp.zeros((NB, K, v)),
    "policy_logits": jnp.zeros((NB, K + 1, A)),
    "chance_logits": jnp.zeros((NB, K + 1, C)),
    "identity_logits": jnp.zeros((NB, K, P + 2)),
  }


def test_exact_terms_with_uniform_outputs():
  t = _terms(_zeros(1), _batch())
  # Scalar heads predict 0: sum_k z^2, averaged over the 2 samples.
  np.testing.assert_allclose(t["value"], (1 + 0.25 + 0.0625) / 2, rtol=1e-6)
  np.testing.assert_allclose(t["reward"], (1 + 4) / 2, rtol=1e-6)
  # Uniform logits: CE = log(#classes) per unmasked target (they sum to 1).
  np.testing.assert_allclose(t["policy"], 3 * np.log(3) / 2, rtol=1e-6)
  np.testing.assert_allclose(t["chance"], 2 * np.log(2) / 2, rtol=1e-6)
  np.testing.assert_allclose(t["identity"], 2 * np.log(4), rtol=1e-6)
  # Categorical heads: the two-hot also sums to 1.
  t = _terms(_zeros(5), _batch(), value_head="categorical", support_size=2)
  np.testing.assert_allclose(t["value"], 3 * np.log(5), rtol=1e-6)
  np.testing.assert_allclose(t["reward"], 2 * np.log(5), rtol=1e-6)


def test_exact_terms_with_hand_set_logits():
  out = _zeros(1)
  # p = [1, 2, 5] / 8 at sample 0, step 0 (target [0.5, 0.5, 0]).
  out["policy_logits"] = out["policy_logits"].at[0, 0].set(jnp.log(jnp.array([1.0, 2.0, 5.0])))
  out["value_logits"] = out["value_logits"].at[0, 0, 0].set(0.75)
  out["identity_logits"] = (
    out["identity_logits"].at[1, 1].set(jnp.array([0.0, 0.0, 0.0, jnp.log(5.0)]))
  )  # p(terminal) = 5/8
  t = _terms(out, _batch())
  ce = -(0.5 * np.log(1 / 8) + 0.5 * np.log(2 / 8))
  np.testing.assert_allclose(t["policy"], (ce + 2 * np.log(3)) / 2, rtol=1e-6)
  np.testing.assert_allclose(t["value"], (0.0625 + 0.25 + 0.0625) / 2, rtol=1e-6)
  np.testing.assert_allclose(t["identity"], (3 * np.log(4) - np.log(5 / 8)) / 2, rtol=1e-6)
  # identity argmax: only sample 1, step 1 is right (3); ties argmax to 0,
  # which is right for sample 0, step 1.
  np.testing.assert_allclose(t["identity_accuracy"], 2 / 4)


def test_noop_targets_off_turn_exact_numbers():
  """With the no-op logits (`NetworkConfig.noop_action`) every step counts:
  each head's cross-entropy runs over its A (C) actions and the no-op, with
  target the no-op where it is not that head's turn."""
  out = _zeros(1)
  out["policy_noop_logits"] = jnp.zeros((NB, K + 1))
  out["chance_noop_logits"] = jnp.zeros((NB, K + 1))
  t = _terms(out, _batch())
  # Uniform over A + 1 = 4 (C + 1 = 3) at all 3 steps of both samples.
  np.testing.assert_allclose(t["policy"], 3 * np.log(4), rtol=1e-6)
  np.testing.assert_allclose(t["chance"], 3 * np.log(3), rtol=1e-6)
  # Sample 1, step 1 is a chance step (policy off turn, chance on turn):
  # no-op logit log 5 there gives p(no-op) = 5/8, CE -log(5/8); sample 0,
  # step 0 is a decision (target [0.5, 0.5, 0]): a no-op logit log 4 costs
  # -log(1/7) there. The chance head's no-op at sample 1, step 1 (on turn,
  # target [0.75, 0.25]) gets logit log 2: CE -log(1/4).
  out["policy_noop_logits"] = out["policy_noop_logits"].at[1, 1].set(np.log(5.0))
  out["policy_noop_logits"] = out["policy_noop_logits"].at[0, 0].set(np.log(4.0))
  out["chance_noop_logits"] = out["chance_noop_logits"].at[1, 1].set(np.log(2.0))
  t = _terms(out, _batch())
  np.testing.assert_allclose(
    t["policy"], (2 * np.log(4) + np.log(7) + 2 * np.log(4) - np.log(5 / 8)) / 2, rtol=1e-6
  )
  np.testing.assert_allclose(t["chance"], (5 * np.log(3) + np.log(4)) / 2, rtol=1e-6)


def test_categorical_target_is_two_hot_of_h():
  out = _zeros(5)
  z = 3.0  # h(3) = 1.003: 0.997 on 1 and 0.003 on 2
  logits = jnp.array([0.0, 1.0, 2.0, 3.0, 4.0])
  out["value_logits"] = out["value_logits"].at[0, 0].set(logits)
  batch = _batch(target_value=jnp.zeros((NB, K + 1)).at[0, 0].set(z))
  t = _terms(out, batch, value_head="categorical", support_size=2)
  logp = np.asarray(jax.nn.log_softmax(logits))
  want = -(0.997 * logp[3] + 0.003 * logp[4])
  np.testing.assert_allclose(t["value"], (want + 5 * np.log(5)) / 2, rtol=1e-5)
  np.testing.assert_allclose(
    value_transform.scalar_to_categorical(jnp.float32(z), 2), [0, 0, 0, 0.997, 0.003], atol=1e-6
  )


def test_masks_are_honoured():
  base = _terms(_zeros(1), _batch())
  out = _zeros(1)
  # Wild logits where the policy / chance masks are off change nothing.
  off_policy = ~_batch().policy_mask
  off_chance = ~_batch().chance_mask
  out["policy_logits"] = jnp.where(off_policy[..., None], jnp.array([30.0, -20.0, 7.0]), 0.0)
  out["chance_logits"] = jnp.where(off_chance[..., None], jnp.array([-40.0, 9.0]), 0.0)
  t = _terms(out, _batch())
  np.testing.assert_allclose(t["policy"], base["policy"], rtol=1e-6)
  np.testing.assert_allclose(t["chance"], base["chance"], rtol=1e-6)
  # ... and the same logits where the masks are on do change the terms.
  out["policy_logits"] = jnp.where(~off_policy[..., None], jnp.array([30.0, -20.0, 7.0]), 0.0)
  assert float(_terms(out, _batch())["policy"]) > float(base["policy"]) + 1


@functools.lru_cache(maxsize=None)
def _catch_batch(n):
  """A fixed batch from random play of Catch, through the replay buffer."""
  env = _catch()
  lanes, steps = 4, 16

  def one(carry, key):
    s = carry
    k_act, k_chance, k_reset = jax.random.split(key, 3)
    action = jax.random.randint(k_act, (lanes,), 0, env.num_actions)
    outcome = jax.vmap(lambda k, p: jax.random.categorical(k, jnp.log(p)))(
      jax.random.split(k_chance, lanes), s.chance_probs
    )
    chance = s.current_player == envs.CHANCE
    env_action = jnp.where(chance, outcome, action)
    nxt = jax.vmap(env.step)(s, env_action)
    rec = replay.Transition(
      observation=s.observation,
      player=s.current_player,
      action=jnp.where(chance, env.num_actions + outcome, action),
      rewards=nxt.rewards,
      search_policy=jnp.where(chance[:, None], 0.0, jax.nn.one_hot(action, env.num_actions)),
      search_value=jnp.zeros((lanes,)),
      chance_probs=s.chance_probs,
      next_player=nxt.current_player,
      done=nxt.done,
      truncated=nxt.truncated,
      valid=jnp.ones((lanes,), bool),
    )
    fresh = jax.vmap(env.init)(jax.random.split(k_reset, lanes))
    nxt = jax.tree.map(
      lambda f, x: jnp.where(nxt.done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, nxt
    )
    return nxt, rec

  @jax.jit
  def make(key):
    k0, k1, k2 = jax.random.split(key, 3)
    s = jax.vmap(env.init)(jax.random.split(k0, lanes))
    _, chunk = jax.lax.scan(one, s, jax.random.split(k1, steps))
    buf = replay.init_buffer(replay.example_transition(env), steps, lanes)
    buf = replay.add(buf, chunk)
    return replay.sample(
      buf, k2, n, K=3, num_players=1, num_actions=env.num_actions, payoff="single"
    )

  return make(jax.random.PRNGKey(0))


@pytest.mark.parametrize(
  "value_head", ["scalar", pytest.param("categorical", marks=pytest.mark.slow)]
)
def test_loss_goes_down_on_a_fixed_catch_batch(value_head):
  env = _catch()
  batch = _catch_batch(32)
  # Catch's only chance step is the first one, never inside an unroll from a
  # decision step: the chance term is 0 here (its numbers are tested above).
  assert not bool(jnp.any(batch.chance_mask))
  assert bool(jnp.all(batch.policy_mask[:, 0]))
  net = Network(
    env, NetworkConfig(hidden=(32, 32), latent_dim=16, value_head=value_head, support_size=3)
  )
  params = net.init(jax.random.PRNGKey(1))
  cfg = LossConfig()
  opt = optax.chain(optax.clip_by_global_norm(5.0), optax.adam(3e-3))

  @jax.jit
  def train(params):
    def step(carry, _):
      params, state = carry
      (loss, metrics), grads = jax.value_and_grad(ndmz_loss, has_aux=True)(params, net, batch, cfg)
      updates, state = opt.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), metrics

    _, metrics = jax.lax.scan(step, (params, opt.init(params)), None, length=50)
    return metrics

  m = jax.device_get(train(params))
  assert np.all(np.isfinite(m["total"]))
  assert m["total"][-1] < 0.6 * m["total"][0], m["total"][[0, -1]]
  np.testing.assert_array_equal(m["chance"], 0.0)
  for term in ("value", "reward", "policy", "identity"):
    assert m[term][-1] < m[term][0], (term, m[term][[0, -1]])
  np.testing.assert_allclose(
    m["total"],
    m["value"] + m["reward"] + m["policy"] + m["chance"] + m["identity"] + m["l2"],
    rtol=1e-5,
  )


def test_noop_action_in_the_ndmz_loss():
  """A network with the no-op action trains its chance head towards the
  no-op at Catch's decision steps (the term is 0 without it), and its
  choice head's no-op output gets gradient."""
  env = _catch()
  batch = _catch_batch(8)
  net = Network(env, NetworkConfig(hidden=(16,), latent_dim=8, noop_action=True))
  params = net.init(jax.random.PRNGKey(1))
  loss_fn = lambda p: ndmz_loss(p, net, batch, LossConfig())
  (loss, m), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params)
  assert np.isfinite(loss) and float(m["chance"]) > 0
  plain = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  _, m_plain = jax.jit(lambda p: ndmz_loss(p, plain, batch, LossConfig()))(
    plain.init(jax.random.PRNGKey(1))
  )
  np.testing.assert_array_equal(m_plain["chance"], 0.0)
  # f's bias vectors: the policy head's (A + 1) and the chance head's (C + 1).
  biases = [
    g
    for path, g in jax.tree_util.tree_flatten_with_path(grads["f"])[0]
    if path[-1].key == "bias" and g.shape[-1] in (env.num_actions + 1, env.num_chance_outcomes + 1)
  ]
  assert len(biases) == 2 and all(abs(float(b[-1])) > 0 for b in biases)


def test_ndmz_loss_names_a_batch_field_of_the_wrong_shape():
  # jax.eval_shape traces without compiling: the check costs nothing at run time.
  net = Network(_catch(), NetworkConfig(hidden=(16,), latent_dim=8))
  params = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  f32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.float32)
  i32 = lambda *shape: jax.ShapeDtypeStruct(shape, jnp.int32)
  obs = net.observation_shape
  batch = replay.Batch(
    observation=f32(NB, *obs),
    actions=i32(NB, K),
    target_value=f32(NB, K + 1),
    target_reward=f32(NB, K),
    target_policy=f32(NB, K + 1, net.num_actions),
    policy_mask=jax.ShapeDtypeStruct((NB, K + 1), jnp.bool_),
    target_chance=f32(NB, K + 1, net.num_chance_outcomes),
    chance_mask=jax.ShapeDtypeStruct((NB, K + 1), jnp.bool_),
    target_identity=i32(NB, K),
    successor_observation=f32(NB, K, *obs),
  )
  loss = lambda b: jax.eval_shape(lambda p, b: ndmz_loss(p, net, b)[0], params, b)
  assert loss(batch).shape == ()
  for name, shape in (
    ("target_chance", f32(NB, K + 1, net.num_chance_outcomes + 1)),
    ("observation", f32(NB, 12)),
    ("target_identity", i32(NB, K + 1)),
  ):
    with pytest.raises(AssertionError, match=f"Batch.{name}"):
      loss(batch.replace(**{name: shape}))


def test_l2_counts_kernels_only():
  env = envs.make("catch", rows=4, columns=3)
  net = Network(env, NetworkConfig(hidden=(8,), latent_dim=4))
  params = net.init(jax.random.PRNGKey(0))
  params = jax.tree.map(jnp.ones_like, params)
  kernels = sum(
    x.size
    for path, x in jax.tree_util.tree_flatten_with_path(params)[0]
    if path[-1].key == "kernel"
  )
  biases = sum(
    x.size for path, x in jax.tree_util.tree_flatten_with_path(params)[0] if path[-1].key == "bias"
  )
  assert biases > 0
  np.testing.assert_allclose(l2_norm_squared(params), kernels)


def test_loss_config_rejects_negative_weights():
  with pytest.raises(ValueError, match="l2"):
    LossConfig(l2=-1.0)


class _ValueOfFirstFeature:
  """A stand-in for `Network` in the successor-value term: `root` values an
  observation at `params["w"] * obs[0]`, from that observation's mover's view."""

  def __init__(self, payoff, value_head="scalar", support_size=2):
    self.payoff = payoff
    self.config = NetworkConfig(value_head=value_head, support_size=support_size)

  def root(self, params, observation):
    value = params["w"] * observation[:, 0]
    zeros = jnp.zeros_like(value)
    return ModelOutput(
      reward=zeros,
      value=value,
      policy_logits=zeros[:, None],
      chance_logits=zeros[:, None],
      identity_logits=zeros[:, None],
      embedding=zeros[:, None],
    )


def _successor_batch():
  # Sample 0: step 1 is the opponent's decision (identity 1), step 2 is
  # chance (masked). Sample 1: step 1 is the root mover's own decision
  # (identity 0), step 2 is past the end (masked, zeros).
  return _batch(
    target_identity=jnp.array([[1, 2], [0, 3]], jnp.int32),
    successor_observation=jnp.array([[[0.5], [0.0]], [[-0.25], [0.0]]]),
    policy_mask=jnp.array([[True, True, False], [True, True, False]]),
  )


def test_successor_value_exact_numbers_and_views():
  params = {"w": jnp.float32(2.0)}
  batch = _successor_batch()
  # Model values at depths 1, 2 (depth 0 is never read; depth 2 is masked).
  value_logits = jnp.array([[[9.0], [0.2], [7.0]], [[9.0], [0.1], [-3.0]]])
  # Real-successor values: 2 * 0.5 = 1 (opponent: -1 from the root mover's
  # view) and 2 * -0.25 = -0.5 (the root mover's own).
  zero_sum = successor_value_loss(params, _ValueOfFirstFeature("zero_sum"), value_logits, batch)
  np.testing.assert_allclose(zero_sum, ((0.2 + 1.0) ** 2 + (0.1 + 0.5) ** 2) / 2, rtol=1e-6)
  # Collaborative: no flip.
  collab = successor_value_loss(params, _ValueOfFirstFeature("collaborative"), value_logits, batch)
  np.testing.assert_allclose(collab, ((0.2 - 1.0) ** 2 + (0.1 + 0.5) ** 2) / 2, rtol=1e-6)
  # Categorical heads: cross-entropy to the two-hot of h(target); uniform
  # logits over 2S + 1 = 5 bins cost log 5 per unmasked step.
  cat = successor_value_loss(
    params, _ValueOfFirstFeature("zero_sum", "categorical", 2), jnp.zeros((NB, K + 1, 5)), batch
  )
  np.testing.assert_allclose(cat, 2 * np.log(5) / 2, rtol=1e-6)


def test_successor_value_target_has_no_gradient():
  batch = _successor_batch()
  net = _ValueOfFirstFeature("zero_sum")
  value_logits = jnp.array([[[0.0], [0.2], [0.0]], [[0.0], [0.1], [0.0]]])
  grad_w, grad_v = jax.grad(lambda p, v: successor_value_loss(p, net, v, batch), argnums=(0, 1))(
    {"w": jnp.float32(2.0)}, value_logits
  )
  np.testing.assert_array_equal(grad_w["w"], 0.0)
  # d/dv of (v - target)^2 / 2 samples, at the two unmasked entries only.
  want = np.zeros((NB, K + 1, 1))
  want[0, 1, 0], want[1, 1, 0] = (0.2 + 1.0), (0.1 + 0.5)
  np.testing.assert_allclose(grad_v, want, rtol=1e-6)


def test_successor_value_in_the_ndmz_loss():
  env = _catch()
  batch = _catch_batch(8)
  assert batch.successor_observation.shape == (8, 3) + env.observation_shape
  net = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  params = net.init(jax.random.PRNGKey(1))
  off, m_off = ndmz_loss(params, net, batch, LossConfig())
  on, m_on = ndmz_loss(params, net, batch, LossConfig(successor_value_weight=0.5))
  assert "successor_value" not in m_off
  outputs = net.unroll(params, batch.observation, batch.actions)
  term = successor_value_loss(params, net, outputs.value_logits, batch)
  assert float(term) > 0
  np.testing.assert_allclose(m_on["successor_value"], term, rtol=1e-6)
  np.testing.assert_allclose(on, off + 0.5 * term, rtol=1e-6)
  # A batch built without successors is refused when the term is on.
  bare = batch.replace(successor_observation=None)
  with pytest.raises(ValueError, match="successor_observation"):
    ndmz_loss(params, net, bare, LossConfig(successor_value_weight=1.0))


class _LatentIsObservation:
  """A stand-in for `Network` in the consistency term: h(o) = params["w"] * o."""

  def represent(self, params, observation):
    return params["w"] * observation


def test_consistency_exact_numbers_masks_and_no_gradient_into_the_target():
  # Sample 0: depth 1 a decision (read), depth 2 chance (masked). Sample 1:
  # depth 1 a decision, depth 2 past the end (masked).
  batch = _batch(
    successor_observation=jnp.array([[[1.0, 0.0], [5.0, 5.0]], [[3.0, 4.0], [0.0, 0.0]]]),
    policy_mask=jnp.array([[True, True, False], [True, True, False]]),
  )
  latents = jnp.array([[[1.0, 1.0], [9.0, -9.0]], [[4.0, -3.0], [7.0, 7.0]]])
  params = {"w": jnp.float32(2.0)}
  net = _LatentIsObservation()
  got = consistency_loss(params, net, latents, batch)
  # cos((1, 1), (1, 0)) = 1 / sqrt 2; cos((4, -3), (3, 4)) = 0 (h's scale is immaterial).
  np.testing.assert_allclose(got, ((1 - 1 / np.sqrt(2)) + (1 - 0.0)) / 2, rtol=1e-6)
  grad_w, grad_z = jax.grad(lambda p, z: consistency_loss(p, net, z, batch), argnums=(0, 1))(
    params, latents
  )
  np.testing.assert_array_equal(grad_w["w"], 0.0)
  np.testing.assert_array_equal(grad_z[:, 1], 0.0)  # masked depths get no gradient
  assert np.abs(np.asarray(grad_z[:, 0])).sum() > 0


def test_consistency_in_the_ndmz_loss():
  batch = _catch_batch(8)
  env = _catch()
  net = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  params = net.init(jax.random.PRNGKey(1))
  off, m_off = ndmz_loss(params, net, batch, LossConfig())
  on, m_on = ndmz_loss(params, net, batch, LossConfig(consistency_weight=2.0))
  assert "consistency" not in m_off
  outputs = net.unroll(params, batch.observation, batch.actions)
  assert outputs.latents.shape == (8, 3, 8)
  term = consistency_loss(params, net, outputs.latents, batch)
  assert 0 < float(term) <= 2 * 3
  np.testing.assert_allclose(m_on["consistency"], term, rtol=1e-6)
  np.testing.assert_allclose(on, off + 2.0 * term, rtol=1e-6)
  # The latents are the ones g reached: depth 1 is g(h(o), a_0).
  first, _, _ = net.dynamics(params, net.represent(params, batch.observation), batch.actions[:, 0])
  np.testing.assert_allclose(outputs.latents[:, 0], first, rtol=1e-5, atol=1e-6)
  bare = batch.replace(successor_observation=None)
  with pytest.raises(ValueError, match="successor_observation"):
    ndmz_loss(params, net, bare, LossConfig(consistency_weight=1.0))


class _DecoderIsIdentity:
  """A stand-in for `Network` in the reconstruction term: d(s) = params["w"] * s."""

  def decode(self, params, embedding):
    return params["w"] * embedding.reshape(embedding.shape[0], -1)


def test_reconstruction_exact_numbers_and_masks():
  # Depth 0 of both samples is read; depth 1 is a decision on both; depth 2
  # chance on sample 0 and past the end on sample 1 (masked).
  batch = _batch(
    observation=jnp.array([[1.0, 1.0], [0.0, 2.0]]),
    successor_observation=jnp.array([[[1.0, 0.0], [5.0, 5.0]], [[3.0, 4.0], [0.0, 0.0]]]),
    policy_mask=jnp.array([[True, True, False], [True, True, False]]),
  )
  root = jnp.array([[1.0, 0.0], [0.0, 1.0]])
  latents = jnp.array([[[1.0, 1.0], [9.0, -9.0]], [[1.0, 2.0], [7.0, 7.0]]])
  net, params = _DecoderIsIdentity(), {"w": jnp.float32(2.0)}
  got = reconstruction_loss(params, net, root, latents, batch)
  # Sample 0: depth 0 d = (2, 0) vs (1, 1): mean sq 1; depth 1 (2, 2) vs (1, 0): 2.5.
  # Sample 1: depth 0 (0, 2) vs (0, 2): 0; depth 1 (2, 4) vs (3, 4): 0.5.
  np.testing.assert_allclose(got, ((1.0 + 2.5) + (0.0 + 0.5)) / 2, rtol=1e-6)
  grad_z = jax.grad(lambda z: reconstruction_loss(params, net, root, z, batch))(latents)
  np.testing.assert_array_equal(grad_z[:, 1], 0.0)  # masked depths get no gradient
  assert np.abs(np.asarray(grad_z[:, 0])).sum() > 0


def test_reconstruction_in_the_ndmz_loss_and_the_decoder_is_optional():
  batch = _catch_batch(8)
  env = _catch()
  plain = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  net = Network(env, NetworkConfig(hidden=(16,), latent_dim=8, decoder=True))
  params = net.init(jax.random.PRNGKey(1))
  # The decoder adds "d" and leaves h, g and f as they were drawn without it.
  base = plain.init(jax.random.PRNGKey(1))
  assert set(params) == {"h", "g", "f", "d"} and set(base) == {"h", "g", "f"}
  chex.assert_trees_all_equal({k: params[k] for k in base}, base)
  off, m_off = ndmz_loss(params, net, batch, LossConfig())
  on, m_on = ndmz_loss(params, net, batch, LossConfig(reconstruction_weight=0.5))
  assert "reconstruction" not in m_off
  outputs = net.unroll(params, batch.observation, batch.actions)
  np.testing.assert_allclose(
    outputs.root_latent, net.represent(params, batch.observation), rtol=1e-6
  )
  term = reconstruction_loss(params, net, outputs.root_latent, outputs.latents, batch)
  assert float(term) > 0
  np.testing.assert_allclose(m_on["reconstruction"], term, rtol=1e-6)
  np.testing.assert_allclose(on, off + 0.5 * term, rtol=1e-6)
  # The term trains h and g as well as the decoder.
  grads = jax.grad(lambda p: ndmz_loss(p, net, batch, LossConfig(reconstruction_weight=1.0))[0])(
    params
  )
  for part in ("h", "g", "d"):
    assert sum(float(jnp.abs(x).sum()) for x in jax.tree.leaves(grads[part])) > 0, part
  with pytest.raises(ValueError, match="needs network.decoder: true"):
    ndmz_loss(base, plain, batch, LossConfig(reconstruction_weight=1.0))
  with pytest.raises(ValueError, match="has no decoder"):
    plain.decode(base, outputs.root_latent)
  with pytest.raises(ValueError, match="decoder needs network kind mlp or conv"):
    NetworkConfig(kind="resnet", decoder=True)


def test_the_papers_model_knobs_load_from_overrides():
  """NDMZ paper 4.2 (no latent scaling, no gradient scaling into the
  dynamics) and 3.2 (no-op targets off turn), and its tree (Appendix A)."""
  cfg = config_lib.load(
    tiny.config_path("nannon"),
    [
      "network.normalize_latent=false",
      "network.dynamics_grad_scale=1",
      "network.noop_action=true",
      "search.tree=paper",
    ],
  )
  assert cfg.network.normalize_latent is False and cfg.network.dynamics_grad_scale == 1.0
  assert cfg.network.noop_action is True and cfg.search.tree == "paper"
  assert config_lib.from_dict(cfg.to_dict()) == cfg
  for item, message in [
    ("network.noop_action=maybe", "network.noop_action must be of type bool"),
    ("search.tree=mcts", r"tree must be one of \('ndmz', 'paper'\)"),
  ]:
    with pytest.raises(ValueError, match=message):
      config_lib.load(tiny.config_path("nannon"), [item])
  with pytest.raises(ValueError, match="does not support search.tree: paper"):
    config_lib.load(tiny.config_path("nannon"), ["agent=stochastic_muzero", "search.tree=paper"])


def test_successor_value_weight_config():
  path = tiny.config_path("nannon")
  assert config_lib.load(path, ["loss.successor_value_weight=2"]).loss.successor_value_weight == 2
  # One game config serves every agent (scripts/compare.py); the others have
  # no learned dynamics for the term and do not read it.
  for agent in ("alphazero", "stochastic_muzero", "tdlambda"):
    config_lib.load(path, [f"agent={agent}", "loss.successor_value_weight=1"])
  with pytest.raises(ValueError, match="successor_value_weight must be >= 0"):
    config_lib.load(path, ["loss.successor_value_weight=-1"])
