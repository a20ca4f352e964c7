"""Tests for anakin_mz.core.networks: shapes, scalar conversion, unroll = root +
recurrent, the halved gradient into each dynamics step, config errors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz.core import value_transform
from anakin_mz.core.networks import Network, NetworkConfig, scale_gradient
from anakin_mz.core.types import ModelOutput

TINY = dict(
  hidden=(32, 32),
  latent_dim=16,
  channels=4,
  repr_blocks=1,
  dynamics_blocks=1,
  prediction_blocks=1,
  head_hidden=8,
)
B, K = 3, 2


def _obs(env, key, n=B):
  # init (not reset): no chance loop to compile; any observation will do.
  return jax.jit(jax.vmap(env.init))(jax.random.split(key, n)).observation


@pytest.mark.parametrize(
  "kind,value_head", [("mlp", "categorical"), ("conv", "scalar"), ("resnet", "scalar")]
)
def test_shapes_and_unroll_matches_root_then_recurrent(kind, value_head):
  env = envs.make("catch", rows=5, columns=3)
  cfg = NetworkConfig(kind=kind, value_head=value_head, support_size=3, **TINY)
  net = Network(env, cfg)
  params = net.init(jax.random.PRNGKey(0))
  obs = _obs(env, jax.random.PRNGKey(1))
  actions = jnp.array([[0, 3], [2, 4], [1, 1]], jnp.int32)  # unified: A=3, C=3

  root = jax.jit(net.root)(params, obs)
  assert isinstance(root, ModelOutput)
  assert root.value.shape == (B,) and root.reward.shape == (B,)
  assert root.policy_logits.shape == (B, 3)
  assert root.chance_logits.shape == (B, 3)
  assert root.identity_logits.shape == (B, 3)  # P + 2 = 3
  np.testing.assert_array_equal(root.reward, 0.0)

  out = jax.jit(net.unroll)(params, obs, actions)
  v = cfg.value_size
  assert out.value_logits.shape == (B, K + 1, v)
  assert out.reward_logits.shape == (B, K, v)
  assert out.policy_logits.shape == (B, K + 1, 3)
  assert out.chance_logits.shape == (B, K + 1, 3)
  assert out.identity_logits.shape == (B, K, 3)

  # The forward pass of unroll is exactly root, then recurrent along actions.
  rec = jax.jit(net.recurrent)
  np.testing.assert_allclose(
    net.to_scalar(out.value_logits[:, 0]), root.value, rtol=1e-5, atol=1e-6
  )
  emb = root.embedding
  for k in range(K):
    step = rec(params, jax.random.PRNGKey(9), actions[:, k], emb)
    emb = step.embedding
    assert step.value.shape == (B,) and step.reward.shape == (B,)
    np.testing.assert_allclose(
      net.to_scalar(out.reward_logits[:, k]), step.reward, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
      net.to_scalar(out.value_logits[:, k + 1]), step.value, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
      out.identity_logits[:, k], step.identity_logits, rtol=1e-5, atol=1e-6
    )
    np.testing.assert_allclose(
      out.policy_logits[:, k + 1], step.policy_logits, rtol=1e-5, atol=1e-6
    )


def test_categorical_scalar_is_inverse_transform_of_mean():
  env = envs.make("catch", rows=4, columns=2)
  net = Network(env, NetworkConfig(value_head="categorical", support_size=2, **TINY))
  logits = jnp.array([[0.0, 0.0, 0.0, 0.0, jnp.log(3.0)]])  # p = 1/7..3/7
  mean = (-2 - 1 + 0 + 1 + 2 * 3) / 7.0
  np.testing.assert_allclose(
    net.to_scalar(logits), value_transform.inverse_transform(mean), rtol=1e-6
  )


def test_latent_is_min_max_scaled():
  env = envs.make("catch", rows=5, columns=3)
  net = Network(env, NetworkConfig(**TINY))
  params = net.init(jax.random.PRNGKey(0))
  root = net.root(params, _obs(env, jax.random.PRNGKey(2)))
  lat = np.asarray(root.embedding)
  np.testing.assert_allclose(lat.min(axis=1), 0.0, atol=1e-6)
  np.testing.assert_allclose(lat.max(axis=1), 1.0, atol=1e-5)


def test_latent_is_not_scaled_without_normalize_latent():
  """The NDMZ paper's setting (4.2: "We did not scale the hidden states")."""
  env = envs.make("catch", rows=5, columns=3)
  net = Network(env, NetworkConfig(normalize_latent=False, **TINY))
  params = net.init(jax.random.PRNGKey(0))
  lat = np.asarray(net.root(params, _obs(env, jax.random.PRNGKey(2))).embedding)
  assert lat.min() < -1e-3 or lat.max() > 1.0 + 1e-3
  assert not np.allclose(lat.min(axis=1), 0.0, atol=1e-6)


@pytest.mark.parametrize("kind", ["mlp", pytest.param("resnet", marks=pytest.mark.slow)])
def test_noop_action_adds_one_output_to_each_policy_head(kind):
  """The paper's no-op action (3.2): f's choice and chance heads have one
  more output. Inference reads the real actions only, their softmax the full
  one renormalised; `unroll` gives the no-op logits apart."""
  env = envs.make("catch", rows=5, columns=3)
  net = Network(env, NetworkConfig(kind=kind, noop_action=True, **TINY))
  plain = Network(env, NetworkConfig(kind=kind, **TINY))
  params = net.init(jax.random.PRNGKey(0))
  out_sizes = lambda p: sorted(x.shape[-1] for x in jax.tree.leaves(p["f"]))
  grown = out_sizes(params)
  base = out_sizes(plain.init(jax.random.PRNGKey(0)))
  assert len(grown) == len(base) and sum(grown) == sum(base) + 4  # 2 kernels + 2 biases
  obs = _obs(env, jax.random.PRNGKey(1))
  actions = jnp.array([[0, 3], [2, 4], [1, 1]], jnp.int32)
  root = net.root(params, obs)
  assert root.policy_logits.shape == (B, 3) and root.chance_logits.shape == (B, 3)
  out = net.unroll(params, obs, actions)
  assert out.policy_logits.shape == (B, K + 1, 3) and out.policy_noop_logits.shape == (B, K + 1)
  assert out.chance_logits.shape == (B, K + 1, 3) and out.chance_noop_logits.shape == (B, K + 1)
  np.testing.assert_allclose(out.policy_logits[:, 0], root.policy_logits, rtol=1e-5, atol=1e-6)
  full = jnp.concatenate([out.policy_logits, out.policy_noop_logits[..., None]], axis=-1)
  np.testing.assert_allclose(
    jax.nn.softmax(full)[..., :3] / jnp.sum(jax.nn.softmax(full)[..., :3], -1, keepdims=True),
    jax.nn.softmax(out.policy_logits),
    rtol=1e-5,
  )
  rest = plain.unroll(plain.init(jax.random.PRNGKey(0)), obs, actions)
  assert rest.policy_noop_logits is None and rest.chance_noop_logits is None


def test_scale_gradient():
  f = lambda x: jnp.sum(scale_gradient(x, 0.5) ** 2)
  x = jnp.array([1.0, -2.0])
  np.testing.assert_allclose(f(x), 5.0)
  np.testing.assert_allclose(jax.grad(f)(x), 0.5 * 2 * x)


def test_gradient_is_halved_entering_each_dynamics_step():
  """d reward_k / d params(h) with scale 0.5 is 0.5^(k+1) times the unscaled
  gradient: the latent passes k+1 dynamics entries before reward k."""
  env = envs.make("catch", rows=5, columns=3)
  obs = _obs(env, jax.random.PRNGKey(3))
  actions = jnp.array([[0, 1, 2]] * B, jnp.int32)

  def grads(scale):
    net = Network(env, NetworkConfig(dynamics_grad_scale=scale, **TINY))
    params = net.init(jax.random.PRNGKey(0))
    fn = lambda p: jnp.sum(net.unroll(p, obs, actions).reward_logits, axis=(0, 2))  # [K]
    return jax.jit(jax.jacrev(fn))(params)["h"]  # leaves [K, ...]

  half = jax.tree.leaves(grads(0.5))
  full = jax.tree.leaves(grads(1.0))
  for k in range(3):
    assert any(float(jnp.abs(g[k]).max()) > 0 for g in full)
    for a, b in zip(half, full):
      np.testing.assert_allclose(a[k], 0.5 ** (k + 1) * b[k], rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("name", envs.registered())
def test_every_registered_env_gets_an_mlp(name):
  env = envs.make(name)
  net = Network(env, NetworkConfig(**TINY))
  # Shapes only (eval_shape traces without compiling): the numerics are the
  # same code as for Catch.
  params = jax.eval_shape(net.init, jax.random.PRNGKey(0))
  obs = jax.ShapeDtypeStruct((2,) + env.observation_shape, jnp.float32)
  out = jax.eval_shape(net.unroll, params, obs, jax.ShapeDtypeStruct((2, 1), jnp.int32))
  assert out.identity_logits.shape == (2, 1, env.num_players + 2)
  assert out.chance_logits.shape == (2, 2, env.num_chance_outcomes)
  assert out.policy_logits.shape == (2, 2, env.num_actions)
  root = jax.eval_shape(net.root, params, obs)
  assert root.value.shape == (2,)
  if len(env.observation_shape) == 3:
    for kind in ("conv", "resnet"):
      res = Network(env, NetworkConfig(kind=kind, **TINY))
      p = jax.eval_shape(res.init, jax.random.PRNGKey(0))
      assert jax.eval_shape(res.root, p, obs).policy_logits.shape == (2, env.num_actions)


def test_config_errors():
  with pytest.raises(ValueError, match="kind"):
    NetworkConfig(kind="transformer")
  with pytest.raises(ValueError, match="value_head"):
    NetworkConfig(value_head="quantile")
  with pytest.raises(ValueError, match="support_size"):
    NetworkConfig(support_size=0)
  with pytest.raises(ValueError, match="conv_channels"):
    NetworkConfig(conv_channels=())
  with pytest.raises(ValueError, match="conv_channels"):
    NetworkConfig(conv_channels=(16, 0))
  assert NetworkConfig(conv_channels=[8]).conv_channels == (8,)
  assert NetworkConfig(hidden=[8, 8]).hidden == (8, 8)  # lists from YAML
  with pytest.raises(ValueError, match="noop_action must be true or false"):
    NetworkConfig(noop_action="yes")
  hash(NetworkConfig())


@pytest.mark.parametrize("kind", ["conv", "resnet"])
def test_planes_kinds_reject_flat_observations(kind):
  class Flat(envs.catch.Catch):
    name = "flat_catch_for_test"

    @property
    def observation_shape(self):
      return (self.rows * self.columns,)

  env = envs.Env(Flat(rows=4, columns=3))
  with pytest.raises(ValueError, match=f"{kind} needs .*kind='mlp'"):
    Network(env, NetworkConfig(kind=kind))
  Network(env, NetworkConfig(kind="mlp", **TINY)).init(jax.random.PRNGKey(0))


@pytest.mark.parametrize("conv_impl", ["xla", "matmul"])
@pytest.mark.parametrize("tap,shift", [((1, 1), 0), ((1, 2), 1)])
def test_conv_kind_is_its_torso_then_the_mlp_kind(tap, shift, conv_impl):
  """A one-channel torso whose 3x3 kernel is a single 1 at `tap` copies (tap
  (1, 1)) or shifts left by a column (tap (1, 2): out[i, j] = in[i, j + 1],
  zero past the edge) the 0/1 plane, and ReLU keeps it: with the same dense
  params the conv kind gives exactly the mlp kind on that plane, in either
  form of the conv layer."""
  env = envs.make("catch", rows=5, columns=3)
  obs = _obs(env, jax.random.PRNGKey(4), n=8)
  assert float(obs.sum()) > 0
  mlp = Network(env, NetworkConfig(**TINY))
  conv = Network(env, NetworkConfig(kind="conv", conv_channels=(1,), conv_impl=conv_impl, **TINY))
  p_mlp = mlp.init(jax.random.PRNGKey(0))
  kernel = np.zeros((3, 3, 1, 1), np.float32)
  kernel[tap] = 1.0
  p_conv = dict(p_mlp)
  p_conv["h"] = {
    "params": {
      "Conv_0": {"kernel": jnp.asarray(kernel), "bias": jnp.zeros((1,))},
      "_MLPRepresentation_0": p_mlp["h"]["params"],
    }
  }
  # The filled structure is what conv.init builds.
  assert jax.tree.structure(p_conv) == jax.tree.structure(conv.init(jax.random.PRNGKey(0)))
  shifted = jnp.pad(obs[:, :, shift:], ((0, 0), (0, 0), (0, shift), (0, 0)))
  want = mlp.root(p_mlp, shifted)
  got = conv.root(p_conv, obs)
  np.testing.assert_allclose(got.embedding, want.embedding, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(got.value, want.value, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(got.policy_logits, want.policy_logits, rtol=1e-6, atol=1e-6)
  if shift:  # the plane moved, so the mlp on the raw plane differs
    assert not np.allclose(mlp.root(p_mlp, obs).embedding, got.embedding)


def test_conv_torso_layer_equals_flax_conv():
  """conv_impl "matmul"'s 3x3 layer (a matmul on shifted copies, fast inside
  the learner's scan on XLA's CPU) has nn.Conv's params and init and
  computes its convolution and gradients, to float rounding, on random
  planes; a whole conv network's params restore in either form."""
  import flax.linen as nn

  from anakin_mz.core.networks import _Conv3x3

  x = jax.random.normal(jax.random.PRNGKey(0), (4, 6, 5, 3))
  ref = nn.Conv(7, (3, 3), padding="SAME")
  ours = _Conv3x3(7)
  params = ref.init(jax.random.PRNGKey(1), x)
  mine = ours.init(jax.random.PRNGKey(1), x)
  assert jax.tree.structure(mine) == jax.tree.structure(params)
  jax.tree.map(np.testing.assert_array_equal, mine, params)
  params = jax.tree.map(  # a bias that is not zero
    lambda p: p + jax.random.normal(jax.random.PRNGKey(2), p.shape), params
  )
  np.testing.assert_allclose(ours.apply(params, x), ref.apply(params, x), rtol=1e-5, atol=1e-5)

  def grads(module):
    loss = lambda p, x: jnp.sum(jnp.tanh(module.apply(p, x)))
    return jax.grad(loss, argnums=(0, 1))(params, x)

  jax.tree.map(
    lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4), grads(ours), grads(ref)
  )
  env = envs.make("catch", rows=5, columns=3)
  obs = _obs(env, jax.random.PRNGKey(4), n=8)
  nets = {
    impl: Network(env, NetworkConfig(kind="conv", conv_channels=(4, 3), conv_impl=impl, **TINY))
    for impl in ("xla", "matmul")
  }
  p = nets["xla"].init(jax.random.PRNGKey(3))
  jax.tree.map(np.testing.assert_array_equal, nets["matmul"].init(jax.random.PRNGKey(3)), p)
  np.testing.assert_allclose(
    nets["matmul"].root(p, obs).embedding, nets["xla"].root(p, obs).embedding, atol=1e-5
  )
  with pytest.raises(ValueError, match="conv_impl must be one of .*'xla', 'matmul'.*got 'fft'"):
    NetworkConfig(kind="conv", conv_impl="fft")


def test_resnet_unroll_loop_equals_scan():
  """The resnet's unrolled K steps (fast on XLA CPU) compute what the rolled
  lax.scan did; every kind unrolls (a shorter kernel chain)."""
  env = envs.make("catch", rows=5, columns=3)
  net = Network(env, NetworkConfig(kind="resnet", **TINY))
  assert net.unroll_loop
  params = net.init(jax.random.PRNGKey(0))
  obs = _obs(env, jax.random.PRNGKey(5))
  actions = jnp.array([[0, 3], [2, 4], [1, 1]], jnp.int32)
  loop = net.unroll(params, obs, actions)
  net.unroll_loop = False
  scan = net.unroll(params, obs, actions)
  for a, b in zip(jax.tree.leaves(loop), jax.tree.leaves(scan)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  assert Network(env, NetworkConfig(kind="conv", **TINY)).unroll_loop


def test_mlp_unroll_equals_the_rolled_scan():
  """The mlp kind unrolls its K steps too (a shorter kernel chain, issue
  64): the outputs of the rolled lax.scan, to float rounding."""
  env = envs.make("catch", rows=5, columns=3)
  net = Network(env, NetworkConfig(kind="mlp", **TINY))
  assert net.unroll_loop
  params = net.init(jax.random.PRNGKey(0))
  obs = _obs(env, jax.random.PRNGKey(5))
  actions = jnp.array([[0, 3], [2, 4], [1, 1]], jnp.int32)
  unrolled = jax.jit(net.unroll)(params, obs, actions)
  net.unroll_loop = False
  rolled = jax.jit(net.unroll)(params, obs, actions)
  for a, b in zip(jax.tree.leaves(unrolled), jax.tree.leaves(rolled)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_init_is_lecun_normal_with_zero_biases():
  env = envs.make("catch")
  net = Network(env, NetworkConfig(hidden=(64, 64), latent_dim=16))
  params = net.init(jax.random.PRNGKey(0))
  first = params["h"]["params"]["_MLP_0"]["Dense_0"]
  fan_in = 10 * 5 * 1
  np.testing.assert_allclose(np.std(first["kernel"]), fan_in**-0.5, rtol=0.1)
  assert abs(float(np.mean(first["kernel"]))) < 0.1 * fan_in**-0.5 * 3
  np.testing.assert_array_equal(first["bias"], 0.0)
  other = net.init(jax.random.PRNGKey(1))["h"]["params"]["_MLP_0"]["Dense_0"]
  assert not np.allclose(first["kernel"], other["kernel"])


# ------------------------------------------------------ value_transform

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_floats = st.floats(-1e4, 1e4, allow_nan=False, width=32)


def _pad(xs):
  """A fixed shape [64], so that jax compiles each op once, not per example."""
  return np.resize(np.asarray(xs, np.float32), 64)


@settings(max_examples=40, deadline=None)
@given(st.lists(_floats, min_size=1, max_size=64))
def test_transform_round_trip(xs):
  x = _pad(xs)
  y = value_transform.transform(x)
  assert np.all(np.abs(y) <= np.abs(x) + 1e-6)  # it contracts
  np.testing.assert_allclose(value_transform.inverse_transform(y), x, rtol=1e-4, atol=1e-3)


@settings(max_examples=40, deadline=None)
@given(
  st.lists(st.floats(-60.0, 60.0, allow_nan=False, width=32), min_size=1, max_size=64),
  st.sampled_from([1, 3, 10]),
)  # few shapes: each one compiles
def test_categorical_round_trip(xs, support_size):
  x = _pad(xs)
  cat = np.asarray(value_transform.scalar_to_categorical(x, support_size))
  assert cat.shape == (64, 2 * support_size + 1)
  assert cat.min() >= 0.0
  np.testing.assert_allclose(cat.sum(-1), 1.0, rtol=1e-6)
  assert np.all((cat > 0).sum(-1) <= 2)
  bound = value_transform.max_representable(support_size)
  np.testing.assert_allclose(
    value_transform.categorical_to_scalar(cat, support_size),
    np.clip(x, -bound, bound),
    rtol=1e-4,
    atol=2e-3,
  )


def test_transform_values():
  # h(3) = sqrt(4) - 1 + 0.003; the thesis example: h = 1.3 -> 0.7 on 1, 0.3 on 2.
  np.testing.assert_allclose(value_transform.transform(jnp.float32(3.0)), 1.003)
  np.testing.assert_allclose(value_transform.transform(jnp.float32(-3.0)), -1.003)
  np.testing.assert_allclose(
    value_transform.two_hot(jnp.float32(1.3), 2), [0, 0, 0, 0.7, 0.3], atol=1e-6
  )
  np.testing.assert_allclose(value_transform.two_hot(jnp.float32(-5.0), 2), [1, 0, 0, 0, 0])
