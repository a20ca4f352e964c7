"""The NDMZ model: representation h, dynamics g and prediction f (flax.linen).

    h(observation)          -> latent s^0
    g(s^{k-1}, a)           -> latent s^k, reward r^k, identity logits i^k
    f(s^k)                  -> choice-policy logits p^k, chance logits c^k, value v^k

`a` is a *unified* action (`anakin_mz.core.types`): player action `a` is `a`,
chance outcome `c` is `num_actions + c`; g sees it one-hot over
`num_actions + num_chance_outcomes`. The identity head has `num_players + 2`
classes (relative players, chance, terminal). Values and rewards are from the
root mover's point of view.

Three bodies share this interface:
* "mlp" (default, the NDMZ paper 4.2): every function is a dense net with the
  `hidden` layers (256, 256), SELU and LeCun-normal init; observations are
  flattened, so any observation shape works.
* "conv" (planes on a CPU): h is a small conv torso on `[H, W, C]` planes
  (`conv_channels`, 3x3, ReLU; MinAtar's DQN torso is one such layer of 16)
  flattened into the "mlp" kind's dense representation; g and f are the "mlp"
  kind's. The convolutions run once per sample (in h), never in the K-step
  unroll, so a learner update costs about what the "mlp" kind's does
  (`scripts/benchmark_networks.py`).
* "resnet" (MooZi 5.1.2): 3x3 residual conv blocks on `[H, W, C]` planes, the
  action as one-hot planes. LayerNorm stands in for BatchNorm, so params are a
  plain pytree with no batch statistics (nothing to thread through jit/pmap).
  Its K-step unroll is a Python loop, not a `lax.scan`: XLA's CPU backend
  leaves the gradient convolutions inside a while loop in a layout its fast
  (Eigen) convolution does not take (`f01b_i01o->01bf`), and they ran ~10x
  slower (Breakthrough 5x5, batch 256, K=5: 28 s against 2.9 s per gradient
  of the unroll, one loaded core). Even unrolled, every dynamics step runs
  `2 * dynamics_blocks + 1` convolutions over the board, so on a CPU it is
  still several times slower than "conv"; it is meant for accelerators.

The latent is min-max scaled to [0, 1] per sample (MuZero appendix G) unless
`normalize_latent=False` (the NDMZ paper did not scale it).

With `noop_action=True` f's choice- and chance-policy heads have one more
output each, the paper's no-op action (3.2), which the loss trains where it is
not that head's player's turn (`anakin_mz.core.loss`). `predict`, `root` and
`recurrent` return the A (C) real actions only, so the search's priors are
the softmax renormalised over them; `unroll` returns the no-op logits apart
(`UnrollOutput.policy_noop_logits`, `chance_noop_logits`).

Value and reward heads are one scalar ("scalar") or logits over the support
`[-S, S]` of `h(x)` ("categorical", `anakin_mz.core.value_transform`). `Network.root`
and `Network.recurrent` always return scalars; `Network.unroll` returns logits.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Sequence, Tuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp

import envs
from anakin_mz.core import value_transform
from anakin_mz.core.types import ModelOutput, Params, UnrollOutput

KINDS = ("mlp", "conv", "resnet")
CONV_IMPLS = ("xla", "matmul")
VALUE_HEADS = ("scalar", "categorical")


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
  """Architecture of h, g and f (hashable: usable as a static jit argument).

  Attributes:
    kind: "mlp" (paper: dense, SELU, LeCun normal), "conv" (a conv torso in
      h, then the mlp kind) or "resnet" (conv blocks everywhere).
    hidden: hidden layer widths of every MLP (h, g and f each get these).
    latent_dim: size of the MLP (and conv kind's) latent.
    conv_channels: widths of the 3x3 conv layers of the conv kind's torso.
    conv_impl: how the conv kind computes each 3x3 layer, with the same params
      and init either way: "xla" (`nn.Conv`, XLA's convolution) or "matmul"
      (one matmul on the nine shifted copies of the planes, `_Conv3x3`; equal
      to float rounding, and ~2.4x faster a Space Invaders step on a CPU,
      where XLA runs a convolution's gradient ~13x slower inside the
      learner's update scan). Checkpoints restore under either.
    channels: conv channels of the resnet latent.
    repr_blocks, dynamics_blocks, prediction_blocks: residual blocks in h, g, f.
    head_hidden: width of the dense layer in each resnet head.
    value_head: "scalar" or "categorical" (value and reward alike).
    support_size: S, the categorical support is the integers [-S, S].
    normalize_latent: min-max scale each latent to [0, 1].
    dynamics_grad_scale: gradient factor entering each dynamics step in
      `unroll` (MuZero: 0.5; the NDMZ paper did not scale it: 1).
    noop_action: the choice- and chance-policy heads get one more output,
      the paper's no-op action (3.2), and NDMZ's loss trains each head
      towards it where its player is not to move (the choice head at chance
      and terminal states and past the episode's end, the chance head at
      decision and terminal states and past the end) instead of leaving those
      steps out of the two terms (module doc). Agents that train their own
      way (alphazero, stochastic_muzero, tdlambda) never train it.
    chance_codes: C, the chance codes of agent stochastic_muzero (0: the
      game's `num_chance_outcomes`); other agents do not read it.
    decoder: a fourth function, d(latent) -> the observation (an MLP of
      `hidden`, params `"d"`), which NDMZ's reconstruction term trains
      (`loss.reconstruction_weight`); the search never calls it. mlp and
      conv kinds only.
  """

  kind: str = "mlp"
  hidden: Tuple[int, ...] = (256, 256)
  latent_dim: int = 256
  conv_channels: Tuple[int, ...] = (16,)
  conv_impl: str = "xla"
  channels: int = 32
  repr_blocks: int = 2
  dynamics_blocks: int = 2
  prediction_blocks: int = 1
  head_hidden: int = 64
  value_head: str = "scalar"
  support_size: int = 10
  normalize_latent: bool = True
  dynamics_grad_scale: float = 0.5
  chance_codes: int = 0
  noop_action: bool = False
  decoder: bool = False

  def __post_init__(self):
    object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
    object.__setattr__(self, "conv_channels", tuple(int(c) for c in self.conv_channels))
    if self.kind not in KINDS:
      raise ValueError(f"network kind must be one of {KINDS}, got {self.kind!r}")
    if self.conv_impl not in CONV_IMPLS:
      raise ValueError(f"conv_impl must be one of {CONV_IMPLS}, got {self.conv_impl!r}")
    if self.value_head not in VALUE_HEADS:
      raise ValueError(f"value_head must be one of {VALUE_HEADS}, got {self.value_head!r}")
    for name in ("latent_dim", "channels", "head_hidden", "support_size"):
      if int(getattr(self, name)) < 1:
        raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
    for name in ("repr_blocks", "dynamics_blocks", "prediction_blocks"):
      if int(getattr(self, name)) < 0:
        raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
    if any(h < 1 for h in self.hidden):
      raise ValueError(f"hidden widths must be >= 1, got {self.hidden}")
    if not self.conv_channels or any(c < 1 for c in self.conv_channels):
      raise ValueError(f"conv_channels must be one or more widths >= 1, got {self.conv_channels}")
    if int(self.chance_codes) < 0:
      raise ValueError(
        f"chance_codes must be >= 0 (0: the game's outcomes), got {self.chance_codes}"
      )
    if not 0.0 <= self.dynamics_grad_scale <= 1.0:
      raise ValueError(f"dynamics_grad_scale must be in [0, 1], got {self.dynamics_grad_scale}")
    for name in ("normalize_latent", "noop_action", "decoder"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
    if self.decoder and self.kind == "resnet":
      raise ValueError("decoder needs network kind mlp or conv, got resnet")

  @property
  def value_size(self) -> int:
    """V: outputs of the value and reward heads (1, or 2S+1)."""
    return 1 if self.value_head == "scalar" else 2 * self.support_size + 1


def scale_gradient(x: chex.Array, scale: float) -> chex.Array:
  """Identity forward; multiplies the gradient by `scale` backward."""
  return x * scale + jax.lax.stop_gradient(x) * (1.0 - scale)


def _min_max(x: chex.Array) -> chex.Array:
  """Scales each sample (leading axis) to [0, 1] over all its features."""
  axes = tuple(range(1, x.ndim))
  lo = jnp.min(x, axis=axes, keepdims=True)
  hi = jnp.max(x, axis=axes, keepdims=True)
  return (x - lo) / (hi - lo + 1e-8)


# ------------------------------------------------------------------ MLP body


class _MLP(nn.Module):
  """Dense layers with SELU and LeCun-normal init."""

  features: Sequence[int]

  @nn.compact
  def __call__(self, x):
    for width in self.features:
      x = nn.selu(nn.Dense(width, kernel_init=nn.initializers.lecun_normal())(x))
    return x


def _dense(n: int) -> nn.Dense:
  return nn.Dense(n, kernel_init=nn.initializers.lecun_normal())


class _MLPRepresentation(nn.Module):
  config: NetworkConfig

  @nn.compact
  def __call__(self, obs):
    x = obs.reshape((obs.shape[0], -1))
    x = _dense(self.config.latent_dim)(_MLP(self.config.hidden)(x))
    return _min_max(x) if self.config.normalize_latent else x


class _Conv3x3(nn.Module):
  """`nn.Conv(features, (3, 3), padding="SAME")` with the same params
  (`kernel` `[3, 3, C, F]`, `bias` `[F]`, the same init) computed as one
  matmul on the 9 shifted copies of `[B, H, W, C]` (im2col): equal to the
  convolution to float rounding. Why: the learner's updates run in a
  `lax.scan`, and XLA's CPU backend runs a convolution's gradient inside a
  while loop in a layout its fast convolution does not take, about 13x
  slower (the resnet kind's note); a matmul's gradient has no such case."""

  features: int

  @nn.compact
  def __call__(self, x):
    c = x.shape[-1]
    kernel = self.param("kernel", nn.initializers.lecun_normal(), (3, 3, c, self.features))
    bias = self.param("bias", nn.initializers.zeros_init(), (self.features,))
    h, w = x.shape[-3], x.shape[-2]
    pad = jnp.pad(x, [(0, 0)] * (x.ndim - 3) + [(1, 1), (1, 1), (0, 0)])
    # (dy, dx, c) order, as the kernel's leading axes flatten.
    patches = jnp.concatenate(
      [pad[..., dy : dy + h, dx : dx + w, :] for dy in range(3) for dx in range(3)], axis=-1
    )
    return patches @ kernel.reshape(9 * c, self.features).astype(x.dtype) + bias


class _ConvRepresentation(nn.Module):
  """3x3 conv layers with ReLU on `[B, H, W, C]`, flattened into the mlp
  kind's representation."""

  config: NetworkConfig

  @nn.compact
  def __call__(self, obs):
    x = obs
    for i, width in enumerate(self.config.conv_channels):
      if self.config.conv_impl == "matmul":
        # Named as nn.Conv's own are, so either form restores the other's params.
        layer = _Conv3x3(width, name=f"Conv_{i}")
      else:
        layer = nn.Conv(width, (3, 3), padding="SAME")
      x = nn.relu(layer(x))
    return _MLPRepresentation(self.config)(x)


class _MLPDynamics(nn.Module):
  config: NetworkConfig
  num_unified: int
  num_identity: int

  @nn.compact
  def __call__(self, latent, action):
    a = jax.nn.one_hot(action, self.num_unified, dtype=latent.dtype)
    x = _MLP(self.config.hidden)(jnp.concatenate([latent, a], axis=-1))
    nxt = _dense(self.config.latent_dim)(x)
    if self.config.normalize_latent:
      nxt = _min_max(nxt)
    reward = _dense(self.config.value_size)(x)
    identity = _dense(self.num_identity)(x)
    return nxt, reward, identity


class _MLPPrediction(nn.Module):
  config: NetworkConfig
  num_actions: int
  num_chance: int

  @nn.compact
  def __call__(self, latent):
    x = _MLP(self.config.hidden)(latent)
    return (
      _dense(self.num_actions)(x),
      _dense(self.num_chance)(x),
      _dense(self.config.value_size)(x),
    )


class _MLPDecoder(nn.Module):
  """d: latent -> the flattened observation (linear output)."""

  config: NetworkConfig
  size: int

  @nn.compact
  def __call__(self, latent):
    return _dense(self.size)(_MLP(self.config.hidden)(latent))


# --------------------------------------------------------------- resnet body


class _ResBlock(nn.Module):
  """conv3x3-norm-relu-conv3x3-norm, + input, relu (MooZi 5.1.2)."""

  channels: int

  @nn.compact
  def __call__(self, x):
    y = nn.Conv(self.channels, (3, 3), padding="SAME")(x)
    y = nn.relu(nn.LayerNorm()(y))
    y = nn.Conv(self.channels, (3, 3), padding="SAME")(y)
    y = nn.LayerNorm()(y)
    return nn.relu(x + y)


class _Head(nn.Module):
  """flatten -> dense -> norm -> relu -> dense."""

  hidden: int
  out: int

  @nn.compact
  def __call__(self, x):
    x = x.reshape((x.shape[0], -1))
    x = nn.relu(nn.LayerNorm()(nn.Dense(self.hidden)(x)))
    return nn.Dense(self.out)(x)


class _ResRepresentation(nn.Module):
  config: NetworkConfig

  @nn.compact
  def __call__(self, obs):
    x = nn.Conv(self.config.channels, (3, 3), padding="SAME")(obs)
    for _ in range(self.config.repr_blocks):
      x = _ResBlock(self.config.channels)(x)
    return _min_max(x) if self.config.normalize_latent else x


class _ResDynamics(nn.Module):
  config: NetworkConfig
  num_unified: int
  num_identity: int

  @nn.compact
  def __call__(self, latent, action):
    a = jax.nn.one_hot(action, self.num_unified, dtype=latent.dtype)
    planes = jnp.broadcast_to(a[:, None, None, :], latent.shape[:3] + (self.num_unified,))
    x = nn.Conv(self.config.channels, (3, 3), padding="SAME")(
      jnp.concatenate([latent, planes], axis=-1)
    )
    for _ in range(self.config.dynamics_blocks):
      x = _ResBlock(self.config.channels)(x)
    nxt = _min_max(x) if self.config.normalize_latent else x
    reward = _Head(self.config.head_hidden, self.config.value_size)(x)
    identity = _Head(self.config.head_hidden, self.num_identity)(x)
    return nxt, reward, identity


class _ResPrediction(nn.Module):
  config: NetworkConfig
  num_actions: int
  num_chance: int

  @nn.compact
  def __call__(self, latent):
    x = latent
    for _ in range(self.config.prediction_blocks):
      x = _ResBlock(self.config.channels)(x)
    hid = self.config.head_hidden
    return (
      _Head(hid, self.num_actions)(x),
      _Head(hid, self.num_chance)(x),
      _Head(hid, self.config.value_size)(x),
    )


# ------------------------------------------------------------------ Network


def _fill_params(shapes: Params, key: chex.PRNGKey) -> Params:
  """Params with the structure of `shapes` (ShapeDtypeStructs): "kernel"
  leaves LeCun normal, "scale" leaves 1, everything else 0."""
  leaves, treedef = jax.tree_util.tree_flatten_with_path(shapes)
  names = [str(getattr(path[-1], "key", path[-1])) for path, _ in leaves]
  sizes = [
    math.prod(leaf.shape) if name == "kernel" else 0 for name, (_, leaf) in zip(names, leaves)
  ]
  noise = jax.random.normal(key, (max(sum(sizes), 1),), jnp.float32)
  out, start = [], 0
  for name, size, (_, leaf) in zip(names, sizes, leaves):
    if name == "kernel":
      fan_in = math.prod(leaf.shape[:-1])
      out.append(noise[start : start + size].reshape(leaf.shape) / math.sqrt(fan_in))
      start += size
    elif name == "scale":
      out.append(jnp.ones(leaf.shape, leaf.dtype))
    else:
      out.append(jnp.zeros(leaf.shape, leaf.dtype))
  return jax.tree_util.tree_unflatten(treedef, out)


def head_to_scalar(logits: chex.Array, config: NetworkConfig) -> chex.Array:
  """A value or reward head's output `[..., V]` -> `[...]` scalars: the one
  unit of a scalar head, the expectation of a categorical one (on h(x))."""
  if config.value_head == "scalar":
    return logits[..., 0]
  return value_transform.logits_to_scalar(logits, config.support_size)


def input_shape(env: envs.Env, kind: str) -> Tuple[int, ...]:
  """The shape in which representation kind `kind` reads one observation of
  `env`: as it is for "mlp"; `[H, W, C]` for the planes kinds (an `[H, W]`
  observation gets one channel).

  Raises:
    ValueError: a planes kind on an observation that is neither `[H, W]` nor
      `[H, W, C]`.
  """
  shape = tuple(env.observation_shape)
  if kind == "mlp":
    return shape
  if len(shape) == 2:
    return shape + (1,)
  if len(shape) != 3:
    raise ValueError(
      f"{kind} needs [H, W, C] (or [H, W]) observations; env {env.id!r} "
      f"has shape {shape}. Use kind='mlp'."
    )
  return shape


class Network:
  """h, g and f for one env. Params: `{"h": ..., "g": ..., "f": ...}`, and
  `"d"` with a decoder (`NetworkConfig.decoder`).

  All methods are pure and jittable in `params` and the arrays; the network
  object itself is static (close over it, or pass it as a static argument).
  """

  def __init__(self, env: envs.Env, config: NetworkConfig = NetworkConfig()):
    if not isinstance(config, NetworkConfig):
      raise ValueError(f"config must be a NetworkConfig, got {type(config).__name__}")
    self.config = config
    self.num_players = env.num_players
    self.payoff = env.payoff  # zero_sum: an opponent's value is the root mover's, negated
    self.num_actions = env.num_actions
    self.num_chance_outcomes = env.num_chance_outcomes
    self.num_unified = self.num_actions + self.num_chance_outcomes
    self.num_identity = self.num_players + 2
    self.observation_shape = tuple(env.observation_shape)
    self._input_shape = input_shape(env, config.kind)
    # True: `unroll` runs its K steps unrolled (`lax.scan(unroll=True)`),
    # every kind: XLA then fuses across the steps, and the loop's carry and
    # stacking kernels go (the resnet also needs it on the CPU: see the module
    # docstring). In the default Nannon step the loss and gradient run about
    # 37 % fewer kernels in sequence, the same numbers bit for bit
    # (docs/results/accelerator.md, "The kernel chain").
    # False: a rolled `lax.scan` (smaller program, same numbers to rounding).
    self.unroll_loop = True
    # f's policy heads: the real actions, then the no-op where there is one.
    noop = int(config.noop_action)
    heads = (self.num_actions + noop, self.num_chance_outcomes + noop)
    if config.kind in ("mlp", "conv"):
      h = _MLPRepresentation if config.kind == "mlp" else _ConvRepresentation
      self._h = h(config)
      self._g = _MLPDynamics(config, self.num_unified, self.num_identity)
      self._f = _MLPPrediction(config, *heads)
    else:
      self._h = _ResRepresentation(config)
      self._g = _ResDynamics(config, self.num_unified, self.num_identity)
      self._f = _ResPrediction(config, *heads)
    self._d = _MLPDecoder(config, math.prod(self.observation_shape)) if config.decoder else None

  # Pieces.
  def init(self, key: chex.PRNGKey) -> Params:
    """Fresh parameters for PRNG `key`: kernels LeCun normal (normal with
    variance 1/fan_in, as in the SELU paper), biases 0, norm scales 1.

    Flax's own init draws one random tensor per layer; each draw costs XLA
    ~0.2 s of compile on CPU, so we take the shapes from flax and fill all
    kernels from a single normal draw.
    """
    shapes = jax.eval_shape(self._flax_init, jax.random.PRNGKey(0))

    def fill(key):
      params = _fill_params({part: shapes[part] for part in ("h", "g", "f")}, key)
      if "d" in shapes:
        # A key of its own: h, g and f are drawn as without a decoder.
        params["d"] = _fill_params(shapes["d"], jax.random.fold_in(key, 1))
      return params

    return jax.jit(fill)(key)

  def _flax_init(self, key: chex.PRNGKey) -> Params:
    kh, kg, kf = jax.random.split(key, 3)
    obs = jnp.zeros((1,) + self.observation_shape, jnp.float32)
    h = self._h.init(kh, self._prepare(obs))
    latent = self._h.apply(h, self._prepare(obs))
    g = self._g.init(kg, latent, jnp.zeros((1,), jnp.int32))
    f = self._f.init(kf, latent)
    params = {"h": h, "g": g, "f": f}
    if self._d is not None:
      params["d"] = self._d.init(kh, latent)  # shapes only: `init` fills the values
    return params

  def _prepare(self, observation: chex.Array) -> chex.Array:
    observation = jnp.asarray(observation, jnp.float32)
    return observation.reshape(observation.shape[:1] + self._input_shape)

  def represent(self, params: Params, observation: chex.Array) -> chex.Array:
    """h: `[B, *obs]` -> latent `[B, ...]`."""
    return self._h.apply(params["h"], self._prepare(observation))

  def dynamics(self, params: Params, embedding: chex.Array, action: chex.Array):
    """g: latent `[B, ...]`, unified action `[B]` -> (latent, reward logits
    `[B, V]`, identity logits `[B, P+2]`)."""
    return self._g.apply(params["g"], embedding, action.astype(jnp.int32))

  def predict(self, params: Params, embedding: chex.Array):
    """f: latent `[B, ...]` -> (policy logits `[B, A]`, chance logits `[B, C]`,
    value logits `[B, V]`); without the no-op logits (`noop_action`)."""
    policy, chance, value = self._f.apply(params["f"], embedding)
    if self.config.noop_action:
      policy, chance = policy[..., : self.num_actions], chance[..., : self.num_chance_outcomes]
    return policy, chance, value

  def decode(self, params: Params, embedding: chex.Array) -> chex.Array:
    """d: latent `[B, ...]` -> the observation it reconstructs, flattened
    `[B, prod(obs)]` (`NetworkConfig.decoder`)."""
    if self._d is None:
      raise ValueError("this network has no decoder (network.decoder=true adds one)")
    return self._d.apply(params["d"], embedding)

  def to_scalar(self, logits: chex.Array) -> chex.Array:
    """`[..., V]` value/reward head output -> `[...]` scalars."""
    return head_to_scalar(logits, self.config)

  # Inference for the search.
  def root(self, params: Params, observation: chex.Array) -> ModelOutput:
    """h then f on `[B, *obs]`. reward is 0 and identity_logits are 0 (the
    root is a choice node of relative player 0)."""
    latent = self.represent(params, observation)
    policy, chance, value = self.predict(params, latent)
    batch = policy.shape[0]
    return ModelOutput(
      reward=jnp.zeros((batch,), jnp.float32),
      value=self.to_scalar(value),
      policy_logits=policy,
      chance_logits=chance,
      identity_logits=jnp.zeros((batch, self.num_identity), jnp.float32),
      embedding=latent,
    )

  def recurrent(
    self, params: Params, rng_key: chex.PRNGKey, action: chex.Array, embedding: chex.Array
  ) -> ModelOutput:
    """g then f: a `types.RecurrentFn`. `action` `[B]` unified int32."""
    del rng_key
    latent, reward, identity = self.dynamics(params, embedding, action)
    policy, chance, value = self.predict(params, latent)
    return ModelOutput(
      reward=self.to_scalar(reward),
      value=self.to_scalar(value),
      policy_logits=policy,
      chance_logits=chance,
      identity_logits=identity,
      embedding=latent,
    )

  # Training.
  def unroll(self, params: Params, observation: chex.Array, actions: chex.Array) -> UnrollOutput:
    """h, then K steps of g and f along `actions` `[B, K]` (unified).

    The latent's gradient is multiplied by `config.dynamics_grad_scale`
    (0.5) as it enters every dynamics step, the first one included.

    Returns the `UnrollOutput` (shapes there).
    """
    actions = jnp.asarray(actions, jnp.int32)
    latent = self.represent(params, observation)
    predict = lambda latent: self._f.apply(params["f"], latent)  # with any no-op logits
    policy0, chance0, value0 = predict(latent)
    scale = self.config.dynamics_grad_scale

    def step(latent, action):
      latent, reward, identity = self.dynamics(params, scale_gradient(latent, scale), action)
      policy, chance, value = predict(latent)
      return latent, (reward, identity, policy, chance, value, latent)

    _, (reward, identity, policy, chance, value, latents) = jax.lax.scan(
      step, latent, jnp.swapaxes(actions, 0, 1), unroll=self.unroll_loop
    )
    first = lambda x0, xs: jnp.concatenate([x0[:, None], jnp.swapaxes(xs, 0, 1)], axis=1)
    policy, chance = first(policy0, policy), first(chance0, chance)
    a, c = self.num_actions, self.num_chance_outcomes
    noop = self.config.noop_action
    return UnrollOutput(
      value_logits=first(value0, value),
      reward_logits=jnp.swapaxes(reward, 0, 1),
      policy_logits=policy[..., :a],
      chance_logits=chance[..., :c],
      identity_logits=jnp.swapaxes(identity, 0, 1),
      policy_noop_logits=policy[..., a] if noop else None,
      chance_noop_logits=chance[..., c] if noop else None,
      latents=jnp.swapaxes(latents, 0, 1),
      root_latent=latent,
    )
