"""A PPO baseline in the PureJaxRL style, on any single-player `envs.Env`.

The whole training iteration is one jitted function: `num_envs` envs vmapped,
a rollout of `num_steps` keyed steps (`env.step(state, action, key)`, so the
env's own chance is sampled inside the step; a done lane restarts with
`env.reset`), GAE, then `update_epochs` passes of `num_minibatches` clipped-
objective minibatches, Adam with global-norm clipping and (optionally) a
linearly annealed step size. Policy and value are separate MLPs on the
flattened observation (PureJaxRL's actor-critic); illegal actions are masked
out of the policy with the env's legal mask.

Differences from PureJaxRL, both for correctness on any env of the contract:
* a truncated episode (`State.truncated`, the env's step limit) bootstraps
  from the value of the state it was cut at; only `terminated` zeroes it;
* the legal mask is applied (MinAtar: all actions legal, so it is a no-op).

It is an agent like the others (`agent: ppo`, single-player games), trained
by `anakin-mz train --agent=ppo` and the config library alone: the run loop
(`runtime.run.train`) trains it with checkpoints, resume, signals, periodic
evaluation and TensorBoard, through `PPOLearner`, whose Anakin step is
`ppo.iterations` PPO iterations (`update_step` counts iterations). The run's
shared settings are PPO's: `train.num_envs` (N), `train.rollout_length` (T),
`train.learning_rate`, `train.max_grad_norm`, `train.total_updates` (the
iterations: the budget is N*T*total_updates env steps), `discount` (gamma)
and `network.hidden`; the rest is the config's `ppo:` section
(`PPOSection`, the one class of PPO's settings). On D devices each device
plays N/D lanes and draws its own minibatches from them (advantages
normalised per device, gradients averaged over the devices); `--devices 1`
gives the runs of the earlier one-device PPO. PureJaxRL's MinAtar settings
(64 envs x 128 steps, 10M env steps, 256-256 MLPs, Adam 5e-4 annealed,
gamma 0.99) are the shipped configs `ppo/minatar-breakout` and
`ppo/minatar-space_invaders` (`anakin-mz train --env minatar-breakout
--config ppo/minatar-breakout`; another single-player game: add
`env.name=NAME`).

Its measured runs (MinAtar, against NDMZ, on a CPU and a GPU) are in
docs/results/minatar.md.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional, Sequence, Tuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh

import envs
from envs.core import raw_key
from anakin_mz.core import act
from anakin_mz import config as config_lib
from anakin_mz.runtime import mesh as mesh_lib
from anakin_mz.runtime import metrics as metrics_lib
from anakin_mz.core import registry
from anakin_mz.runtime.guard import guarded
from anakin_mz.runtime.learner import BaseLearner
from anakin_mz.core.types import where_lanes

ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


@dataclasses.dataclass(frozen=True)
class PPOSection:
  """The `ppo:` section of a config (`agent: ppo`): PPO's own settings (the
  module docstring names the shared ones it reads from the rest of the
  config). Defaults: PureJaxRL's; not tuned here.

  Attributes:
    update_epochs: passes over each rollout.
    num_minibatches: minibatches per pass (must divide N*T).
    anneal_lr: anneal the step size linearly to 0 over the whole budget.
    gae_lambda: the GAE lambda.
    clip_eps: the ratio clip of the policy objective (and of the value).
    ent_coef, vf_coef: entropy bonus and value loss weights.
    activation: "relu" or "tanh" (the MLPs').
    iterations: PPO iterations per Anakin step (the run loop's step).
  """

  update_epochs: int = 4
  num_minibatches: int = 8
  anneal_lr: bool = True
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  ent_coef: float = 0.01
  vf_coef: float = 0.5
  activation: str = "relu"
  iterations: int = 1

  def __post_init__(self):
    for name in ("update_epochs", "num_minibatches", "iterations"):
      if int(getattr(self, name)) < 1:
        raise ValueError(f"ppo {name} must be >= 1, got {getattr(self, name)}")
    if self.activation not in ACTIVATIONS:
      raise ValueError(
        f"ppo activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}"
      )
    if not 0.0 <= self.gae_lambda <= 1.0:
      raise ValueError(f"ppo gae_lambda must be in [0, 1], got {self.gae_lambda}")
    if not self.clip_eps > 0:
      raise ValueError(f"ppo clip_eps must be > 0, got {self.clip_eps}")
    for name in ("ent_coef", "vf_coef"):
      if getattr(self, name) < 0:
        raise ValueError(f"ppo {name} must be >= 0, got {getattr(self, name)}")


def check_minibatches(num_minibatches: int, rows: int, names: str) -> None:
  """Refuses minibatches that do not split the `rows` = `names` of a rollout."""
  if rows % num_minibatches:
    raise ValueError(f"ppo num_minibatches ({num_minibatches}) must divide {names} ({rows})")


class ActorCritic(nn.Module):
  """Separate policy and value MLPs on the flattened observation."""

  num_actions: int
  hidden: Sequence[int]
  activation: str

  @nn.compact
  def __call__(self, obs):
    act = ACTIVATIONS[self.activation]
    ortho = nn.initializers.orthogonal
    x = obs.reshape((obs.shape[0], -1))
    pi = x
    for width in self.hidden:
      pi = act(nn.Dense(width, kernel_init=ortho(np.sqrt(2)))(pi))
    logits = nn.Dense(self.num_actions, kernel_init=ortho(0.01))(pi)
    v = x
    for width in self.hidden:
      v = act(nn.Dense(width, kernel_init=ortho(np.sqrt(2)))(v))
    value = nn.Dense(1, kernel_init=ortho(1.0))(v)[:, 0]
    return logits, value


@chex.dataclass(frozen=True)
class Rollout:
  """One iteration's experience, time-major `[T, N, ...]`.

  Attributes:
    observation: `[T, N, *obs]` float32, where the action was chosen.
    legal: `[T, N, A]` bool legal mask there.
    action: `[T, N]` int32; log_prob `[T, N]` of it under the acting policy.
    value: `[T, N]` V(observation).
    reward: `[T, N]` reward of the step (player 0).
    terminated: `[T, N]` bool, the step ended the episode by the rules.
    done: `[T, N]` bool, terminated or truncated (the lane restarted).
    next_value: `[T, N]` V of the state the step reached (before a restart).
  """

  observation: chex.Array
  legal: chex.Array
  action: chex.Array
  log_prob: chex.Array
  value: chex.Array
  reward: chex.Array
  terminated: chex.Array
  done: chex.Array
  next_value: chex.Array


@chex.dataclass(frozen=True)
class PPOState:
  """Everything a PPO run carries between iterations.

  Attributes:
    params, opt_state: the actor-critic and its optimizer state.
    env_state: `envs.State` `[N]`, never done (lanes restart).
    episode_return, episode_length: `[N]` of each lane's running episode.
    key: PRNG key of the run.
    update_step: int32 `[]` iterations done.
    env_steps: int32 `[]` env steps done (all lanes).
  """

  params: chex.ArrayTree
  opt_state: chex.ArrayTree
  env_state: envs.State
  episode_return: chex.Array
  episode_length: chex.Array
  key: chex.PRNGKey
  update_step: chex.Array
  env_steps: chex.Array


class ActorCriticModel:
  """`ActorCritic` on one env's observations: PPO's model."""

  def __init__(self, env: envs.Env, hidden: Sequence[int], activation: str):
    self.module = ActorCritic(env.num_actions, tuple(hidden), activation)
    self.observation_shape = tuple(env.observation_shape)

  def init(self, key: chex.PRNGKey) -> chex.ArrayTree:
    """Fresh parameters."""
    return self.module.init(key, jnp.zeros((1,) + self.observation_shape, jnp.float32))

  def apply(self, params, observation: chex.Array) -> Tuple[chex.Array, chex.Array]:
    """`[M, *obs]` -> (policy logits `[M, A]`, value `[M]`)."""
    return self.module.apply(params, observation.astype(jnp.float32))


def gae(rollout: Rollout, gamma: float, gae_lambda: float) -> Tuple[chex.Array, chex.Array]:
  """Generalized advantage estimates and value targets, `[T, N]` each.

  delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t), where s'_t
  is the state step t reached (so a truncated step bootstraps from it); the
  sum A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1} stops at every
  episode end; targets = A + V.
  """
  not_term = 1.0 - rollout.terminated.astype(jnp.float32)
  not_done = 1.0 - rollout.done.astype(jnp.float32)
  delta = rollout.reward + gamma * not_term * rollout.next_value - rollout.value

  def back(adv_next, xs):
    d, nd = xs
    adv = d + gamma * gae_lambda * nd * adv_next
    return adv, adv

  _, adv = jax.lax.scan(back, jnp.zeros_like(delta[0]), (delta, not_done), reverse=True)
  return adv, adv + rollout.value


def _masked_logits(logits: chex.Array, legal: chex.Array) -> chex.Array:
  # A large finite negative (not -inf): the entropy stays finite.
  return jnp.where(legal, logits, -1e9)


class PPO:
  """PPO on one single-player env: `init(key)`, then `iterate(state)` (under
  the learner's `shard_map`, each device on its own lanes).

  `config` is an `agent: ppo` run config (`config_lib.Config`): its `ppo:`
  section and the shared settings the module docstring names.
  """

  def __init__(self, env: envs.Env, config: config_lib.Config):
    if not isinstance(config.agent_config, PPOSection):
      raise ValueError(f"PPO needs an `agent: ppo` config, got agent {config.agent!r}")
    if env.num_players != 1:
      raise ValueError(f"PPO here is single-player; env {env.id!r} has {env.num_players} players")
    self.env = env
    tc = config.train
    self.section: PPOSection = config.agent_config
    self.num_envs, self.num_steps = tc.num_envs, tc.rollout_length  # N (global), T
    self.gamma = config.discount
    self.model = ActorCriticModel(env, config.network.hidden, self.section.activation)
    self.network = self.model.module
    c = self.section
    # The anneal spans the whole budget: train.total_updates iterations.
    updates_total = tc.total_updates * c.update_epochs * c.num_minibatches
    lr = (
      optax.linear_schedule(tc.learning_rate, 0.0, updates_total)
      if c.anneal_lr
      else tc.learning_rate
    )
    self.optimizer = optax.chain(
      optax.clip_by_global_norm(tc.max_grad_norm), optax.adam(lr, eps=1e-5)
    )

  def init(self, key: chex.PRNGKey) -> PPOState:
    k_params, k_env, k_run = jax.random.split(raw_key(key), 3)
    params = self.model.init(k_params)
    n = self.num_envs
    env_state = jax.vmap(self.env.reset)(jax.random.split(k_env, n))
    return PPOState(
      params=params,
      opt_state=self.optimizer.init(params),
      env_state=env_state,
      episode_return=jnp.zeros((n,), jnp.float32),
      episode_length=jnp.zeros((n,), jnp.int32),
      key=k_run,
      update_step=jnp.int32(0),
      env_steps=jnp.int32(0),
    )

  def _apply(self, params, obs, legal):
    logits, value = self.model.apply(params, obs)
    return _masked_logits(logits, legal), value

  def _rollout(self, state: PPOState, key: chex.PRNGKey):
    env = self.env

    def step(carry, k):
      env_state, ret, length = carry
      k_act, k_step, k_reset = jax.random.split(k, 3)
      obs, legal = env_state.observation, env_state.legal_action_mask
      logits, value = self._apply(state.params, obs, legal)
      action = jax.random.categorical(k_act, logits).astype(jnp.int32)
      log_prob = jnp.take_along_axis(jax.nn.log_softmax(logits), action[:, None], 1)[:, 0]
      n = action.shape[0]
      nxt = jax.vmap(env.step)(env_state, action, jax.random.split(k_step, n))
      _, next_value = self._apply(state.params, nxt.observation, nxt.legal_action_mask)
      reward = nxt.rewards[:, 0]
      done = nxt.done
      ret, length = ret + reward, length + 1
      fresh = jax.vmap(env.reset)(jax.random.split(k_reset, n))
      restarted = where_lanes(done, fresh, nxt)
      out = Rollout(
        observation=obs.astype(jnp.float32),
        legal=legal,
        action=action,
        log_prob=log_prob,
        value=value,
        reward=reward,
        terminated=nxt.terminated,
        done=done,
        next_value=next_value,
      )
      stats = (
        jnp.sum(done),
        jnp.sum(jnp.where(done, ret, 0.0)),
        jnp.sum(jnp.where(done, length, 0)),
      )
      carry = (restarted, jnp.where(done, 0.0, ret), jnp.where(done, 0, length))
      return carry, (out, stats)

    carry = (state.env_state, state.episode_return, state.episode_length)
    carry, (rollout, (episodes, return_sum, length_sum)) = jax.lax.scan(
      step, carry, jax.random.split(key, self.num_steps)
    )
    episode = dict(
      episodes=jnp.sum(episodes),
      return_sum=jnp.sum(return_sum),
      length_sum=jnp.sum(length_sum),
    )
    return carry, rollout, episode

  def _loss(self, params, mb: Rollout, adv, target):
    c = self.section
    logits, value = self._apply(params, mb.observation, mb.legal)
    logp_all = jax.nn.log_softmax(logits)
    log_prob = jnp.take_along_axis(logp_all, mb.action[:, None], 1)[:, 0]
    entropy = -jnp.sum(jnp.exp(logp_all) * logp_all, axis=-1).mean()
    v_clipped = mb.value + jnp.clip(value - mb.value, -c.clip_eps, c.clip_eps)
    value_loss = (
      0.5 * jnp.maximum(jnp.square(value - target), jnp.square(v_clipped - target)).mean()
    )
    ratio = jnp.exp(log_prob - mb.log_prob)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    policy_loss = -jnp.minimum(
      ratio * adv, jnp.clip(ratio, 1.0 - c.clip_eps, 1.0 + c.clip_eps) * adv
    ).mean()
    loss = policy_loss + c.vf_coef * value_loss - c.ent_coef * entropy
    metrics = dict(
      loss=loss,
      policy_loss=policy_loss,
      value_loss=value_loss,
      entropy=entropy,
      approx_kl=jnp.mean((ratio - 1.0) - jnp.log(ratio)),
      clip_fraction=jnp.mean(jnp.abs(ratio - 1.0) > c.clip_eps),
    )
    return loss, metrics

  def iterate(
    self, state: PPOState, k_roll: chex.PRNGKey, k_perm: chex.PRNGKey
  ) -> Tuple[PPOState, Dict[str, chex.Array]]:
    """One iteration on this device's lanes: the rollout (keys `k_roll`),
    GAE, the epochs of minibatch updates (permutations `k_perm`), the
    gradients averaged over the devices. Metrics (the same on every device):
    episodes, return_sum, length_sum (of the episodes that ended in the
    rollout, all lanes) and the loss terms averaged over the minibatches."""
    c = self.section
    (env_state, ret, length), rollout, episode = self._rollout(state, k_roll)
    adv, target = gae(rollout, self.gamma, c.gae_lambda)
    rows = rollout.reward.size  # this device's N*T
    flat = lambda x: x.reshape((rows,) + x.shape[2:])
    data = (jax.tree.map(flat, rollout), flat(adv), flat(target))
    size = rows // c.num_minibatches

    def epoch(carry, k):
      perm = jax.random.permutation(k, rows)
      batches = jax.tree.map(
        lambda x: x[perm].reshape((c.num_minibatches, size) + x.shape[1:]), data
      )

      def minibatch(carry, mb):
        params, opt_state = carry
        grads, metrics = jax.grad(self._loss, has_aux=True)(params, *mb)
        grads, metrics = mesh_lib.pmean((grads, metrics))
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

      return jax.lax.scan(minibatch, carry, batches)

    (params, opt_state), metrics = jax.lax.scan(
      epoch, (state.params, state.opt_state), jax.random.split(k_perm, c.update_epochs)
    )
    metrics = jax.tree.map(jnp.mean, metrics)
    new = state.replace(
      params=params,
      opt_state=opt_state,
      env_state=env_state,
      episode_return=ret,
      episode_length=length,
    )
    return new, dict(metrics, **mesh_lib.psum(episode))


def _device_key(key: chex.PRNGKey, num_devices: int) -> chex.PRNGKey:
  """`key`, on D > 1 devices folded with the device's index so that each
  device draws its own (one device: `key` itself, the one-device runs)."""
  return key if num_devices == 1 else jax.random.fold_in(key, mesh_lib.shard_index())


# ----------------------------------------------------------------- learner

LOSS_TERMS = ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


class PPOLearner(BaseLearner):
  """PPO as a learner (`runtime.learner.BaseLearner`) for the run loop: an
  Anakin step is `ppo.iterations` PPO iterations (`PPO.iterate`), guarded
  against non-finite values as every learner's. The state is a `PPOState`
  (its lanes split over the devices); `update_step` counts iterations."""

  def __init__(self, config, mesh: Optional[Mesh] = None):
    super().__init__(config, mesh)
    tc = config.train
    check_minibatches(
      config.agent_config.num_minibatches,
      tc.num_envs // self.num_devices * tc.rollout_length,
      f"the rows of one device's rollout (train.num_envs / {self.num_devices} devices * "
      "train.rollout_length)",
    )
    # PPO's model and optimizer (Adam eps 1e-5, the annealed step size).
    self.ppo = PPO(self.env, config)
    self.network, self.optimizer = self.ppo.model, self.ppo.optimizer
    self.iterations = config.agent_config.iterations
    self.transitions_per_chunk = self.iterations * tc.num_envs * tc.rollout_length
    self.updates_per_chunk = self.iterations

  def init(self, key: chex.Array) -> PPOState:
    return self.ppo.init(key)

  def init_run(self, seed: int) -> PPOState:
    """The run loop's fresh state for `seed`: `init(PRNGKey(seed))` (the
    streams of PPO's first, one-device loop, so its runs keep their numbers)."""
    return self.init(jax.random.PRNGKey(seed))

  def specs(self, state) -> PPOState:
    """The lanes split over the mesh's data axis, all else replicated."""
    like = lambda tree, spec: jax.tree.map(lambda _: spec, tree)
    lanes = mesh_lib.LANES
    return like(state, mesh_lib.REPLICATED).replace(
      env_state=like(state.env_state, lanes), episode_return=lanes, episode_length=lanes
    )

  def local_step(self, state: PPOState) -> Tuple[PPOState, metrics_lib.StepMetrics]:
    """`ppo.iterations` iterations of this device's lanes (`jit_step` runs it
    on every device); a chunk with a non-finite loss term or parameter is
    not applied (its lanes still move on)."""

    def one(carry, _):
      state = carry
      key, k_roll, k_perm = jax.random.split(state.key, 3)
      own = lambda k: _device_key(k, self.num_devices)
      new, metrics = self.ppo.iterate(state, own(k_roll), own(k_perm))
      return new.replace(key=key), metrics

    new, per_iter = jax.lax.scan(one, state, None, length=self.iterations)
    checked = {k: per_iter[k] for k in LOSS_TERMS}
    params, opt_state, applied, nonfinite, first_bad = guarded(
      checked, new.params, new.opt_state, state.params, state.opt_state
    )
    done = jnp.where(applied, self.iterations, 0)
    steps = jnp.int32(self.transitions_per_chunk)
    metrics = metrics_lib.StepMetrics(
      episodes=jnp.sum(per_iter["episodes"]),
      return_sum=jnp.sum(per_iter["return_sum"])[None],
      length_sum=jnp.sum(per_iter["length_sum"]),
      decision_steps=steps,
      transitions=steps,
      updates_applied=done,
      terms={k: jnp.mean(per_iter[k]) for k in LOSS_TERMS},
      nonfinite=nonfinite,
      nonfinite_update=first_bad,
    )
    new = new.replace(
      params=params,
      opt_state=opt_state,
      update_step=state.update_step + done,
      env_steps=state.env_steps + steps,
    )
    return new, metrics


def check(config) -> None:
  """Refuses minibatches that do not split the rollout."""
  tc = config.train
  check_minibatches(
    config.agent_config.num_minibatches,
    tc.num_envs * tc.rollout_length,
    "train.num_envs * train.rollout_length",
  )


AGENT = registry.register(
  registry.AgentSpec(
    name="ppo",
    learner=PPOLearner,
    model=lambda config, env: ActorCriticModel(
      env, config.network.hidden, config.agent_config.activation
    ),
    greedy=lambda model, params: act.logits_player(lambda obs: model.apply(params, obs)[0]),
    value=lambda model, params: lambda obs: model.apply(params, obs)[1],
    plays="greedy policy",
    capabilities=registry.Capabilities(single_player=True),
    section=PPOSection,
    check=check,
  )
)
