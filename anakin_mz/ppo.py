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

`train` drives it from Python and logs to TensorBoard with the project's
writer (`anakin_mz.summary`), under the tags `run.py` uses
(`selfplay/return_p0`, `train/env_steps`, `train/wall_s`,
`throughput/env_steps_per_s`, losses under `train/`), so `scripts/plot.py`
draws PPO and NDMZ runs side by side, by update or by env step.

First figures (2026-11-23, one pinned core of the shared 2-core CPU under a
load average of ~19, default config): `scripts/ppo.py --env minatar-breakout
--minutes 8 --log-every 5` (the gymnax adapter of the wave2-21 branch) went
from return 0.56 (first 41k env steps) to 3.6 (at 123k) in 8 minutes,
compilation included; an iteration (8192 env steps) took ~9.4 s, ~80% of it in
the 4 x 8 minibatch updates of the two 256-256 MLPs, so 10M env steps (the
gymnax reference: Breakout 28) would take hours on this CPU.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

import envs
from envs.core import raw_key

ACTIVATIONS = {"relu": nn.relu, "tanh": nn.tanh}


@dataclasses.dataclass(frozen=True)
class PPOConfig:
  """PPO hyperparameters (hashable). Defaults: 64 envs and an MLP, as in the
  gymnax MinAtar reference, with PureJaxRL's PPO settings; not tuned here.

  Attributes:
    num_envs: N, envs stepped in parallel.
    num_steps: T, steps per env per iteration (N*T env steps an iteration).
    total_env_steps: budget; iterations = total_env_steps // (N*T).
    update_epochs: passes over each rollout.
    num_minibatches: minibatches per pass (must divide N*T).
    learning_rate: Adam step size (annealed linearly to 0 if anneal_lr).
    anneal_lr: anneal over the whole budget.
    gamma, gae_lambda: discount and GAE lambda.
    clip_eps: the ratio clip of the policy objective (and of the value).
    ent_coef, vf_coef: entropy bonus and value loss weights.
    max_grad_norm: global-norm gradient clipping.
    hidden: widths of the policy MLP and of the value MLP.
    activation: "relu" or "tanh".
  """

  num_envs: int = 64
  num_steps: int = 128
  total_env_steps: int = 10_000_000
  update_epochs: int = 4
  num_minibatches: int = 8
  learning_rate: float = 5e-4
  anneal_lr: bool = True
  gamma: float = 0.99
  gae_lambda: float = 0.95
  clip_eps: float = 0.2
  ent_coef: float = 0.01
  vf_coef: float = 0.5
  max_grad_norm: float = 0.5
  hidden: Tuple[int, ...] = (256, 256)
  activation: str = "relu"

  def __post_init__(self):
    object.__setattr__(self, "hidden", tuple(int(h) for h in self.hidden))
    for name in ("num_envs", "num_steps", "update_epochs", "num_minibatches"):
      if int(getattr(self, name)) < 1:
        raise ValueError(f"ppo {name} must be >= 1, got {getattr(self, name)}")
    if (self.num_envs * self.num_steps) % self.num_minibatches:
      raise ValueError(
        f"ppo num_minibatches ({self.num_minibatches}) must divide num_envs * num_steps "
        f"({self.num_envs * self.num_steps})"
      )
    if self.total_env_steps < self.num_envs * self.num_steps:
      raise ValueError(
        f"ppo total_env_steps ({self.total_env_steps}) must be >= num_envs * num_steps "
        f"({self.num_envs * self.num_steps}), one iteration"
      )
    if self.activation not in ACTIVATIONS:
      raise ValueError(
        f"ppo activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}"
      )
    if not self.hidden or any(h < 1 for h in self.hidden):
      raise ValueError(f"ppo hidden must be one or more widths >= 1, got {self.hidden}")
    for name in ("gamma", "gae_lambda"):
      if not 0.0 <= getattr(self, name) <= 1.0:
        raise ValueError(f"ppo {name} must be in [0, 1], got {getattr(self, name)}")
    for name in ("learning_rate", "clip_eps", "max_grad_norm"):
      if not getattr(self, name) > 0:
        raise ValueError(f"ppo {name} must be > 0, got {getattr(self, name)}")
    for name in ("ent_coef", "vf_coef"):
      if getattr(self, name) < 0:
        raise ValueError(f"ppo {name} must be >= 0, got {getattr(self, name)}")

  @property
  def steps_per_iteration(self) -> int:
    return self.num_envs * self.num_steps

  @property
  def num_iterations(self) -> int:
    return self.total_env_steps // self.steps_per_iteration


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
  """Everything one training run carries between iterations.

  Attributes:
    params, opt_state: the actor-critic and its optimizer state.
    env_state: `envs.State` `[N]`, never done (lanes restart).
    episode_return, episode_length: `[N]` of each lane's running episode.
    key: PRNG key; iteration: int32 `[]` iterations done.
  """

  params: chex.ArrayTree
  opt_state: chex.ArrayTree
  env_state: envs.State
  episode_return: chex.Array
  episode_length: chex.Array
  key: chex.PRNGKey
  iteration: chex.Array


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
  """PPO on one single-player env: `init(key)`, then `iterate(state)`."""

  def __init__(self, env: envs.Env, config: PPOConfig = PPOConfig()):
    if not isinstance(config, PPOConfig):
      raise ValueError(f"config must be a PPOConfig, got {type(config).__name__}")
    if env.num_players != 1:
      raise ValueError(f"PPO here is single-player; env {env.id!r} has {env.num_players} players")
    self.env = env
    self.config = config
    self.network = ActorCritic(env.num_actions, config.hidden, config.activation)
    c = config
    updates_total = c.num_iterations * c.update_epochs * c.num_minibatches
    lr = (
      optax.linear_schedule(c.learning_rate, 0.0, updates_total) if c.anneal_lr else c.learning_rate
    )
    self.optimizer = optax.chain(
      optax.clip_by_global_norm(c.max_grad_norm), optax.adam(lr, eps=1e-5)
    )

  def init(self, key: chex.PRNGKey) -> PPOState:
    k_params, k_env, k_run = jax.random.split(raw_key(key), 3)
    obs = jnp.zeros((1,) + tuple(self.env.observation_shape), jnp.float32)
    params = self.network.init(k_params, obs)
    env_state = jax.vmap(self.env.reset)(jax.random.split(k_env, self.config.num_envs))
    n = self.config.num_envs
    return PPOState(
      params=params,
      opt_state=self.optimizer.init(params),
      env_state=env_state,
      episode_return=jnp.zeros((n,), jnp.float32),
      episode_length=jnp.zeros((n,), jnp.int32),
      key=k_run,
      iteration=jnp.int32(0),
    )

  def _apply(self, params, obs, legal):
    logits, value = self.network.apply(params, obs.astype(jnp.float32))
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
      restarted = jax.tree.map(
        lambda a, b: jnp.where(done.reshape(done.shape + (1,) * (a.ndim - 1)), a, b), fresh, nxt
      )
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
      step, carry, jax.random.split(key, self.config.num_steps)
    )
    episode = dict(
      episodes=jnp.sum(episodes),
      return_sum=jnp.sum(return_sum),
      length_sum=jnp.sum(length_sum),
    )
    return carry, rollout, episode

  def _loss(self, params, mb: Rollout, adv, target):
    c = self.config
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

  def iterate(self, state: PPOState) -> Tuple[PPOState, Dict[str, chex.Array]]:
    """One iteration: rollout, GAE, the epochs of minibatch updates.
    Metrics: episodes, return_sum, length_sum (of the episodes that ended
    in the rollout) and the loss terms averaged over the minibatches."""
    c = self.config
    key, k_roll, k_perm = jax.random.split(state.key, 3)
    (env_state, ret, length), rollout, episode = self._rollout(state, k_roll)
    adv, target = gae(rollout, c.gamma, c.gae_lambda)
    flat = lambda x: x.reshape((c.steps_per_iteration,) + x.shape[2:])
    data = (jax.tree.map(flat, rollout), flat(adv), flat(target))
    size = c.steps_per_iteration // c.num_minibatches

    def epoch(carry, k):
      perm = jax.random.permutation(k, c.steps_per_iteration)
      batches = jax.tree.map(
        lambda x: x[perm].reshape((c.num_minibatches, size) + x.shape[1:]), data
      )

      def minibatch(carry, mb):
        params, opt_state = carry
        grads, metrics = jax.grad(self._loss, has_aux=True)(params, *mb)
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), metrics

      return jax.lax.scan(minibatch, carry, batches)

    (params, opt_state), metrics = jax.lax.scan(
      epoch, (state.params, state.opt_state), jax.random.split(k_perm, c.update_epochs)
    )
    metrics = jax.tree.map(jnp.mean, metrics)
    new = PPOState(
      params=params,
      opt_state=opt_state,
      env_state=env_state,
      episode_return=ret,
      episode_length=length,
      key=key,
      iteration=state.iteration + 1,
    )
    return new, dict(metrics, **episode)

  def iterate_n(self, state: PPOState, n: int) -> Tuple[PPOState, Dict[str, chex.Array]]:
    """`n` iterations in one `lax.scan`; metrics summed (episode counts) or
    averaged (losses) over them."""
    state, metrics = jax.lax.scan(lambda s, _: self.iterate(s), state, None, length=n)
    summed = ("episodes", "return_sum", "length_sum")
    return state, {k: jnp.sum(v) if k in summed else jnp.mean(v) for k, v in metrics.items()}


def train(
  env: envs.Env,
  config: PPOConfig,
  key: chex.PRNGKey,
  *,
  log_every: int = 1,
  logdir: Optional[str] = None,
  max_seconds: Optional[float] = None,
  on_log: Optional[Callable[[Dict[str, float]], None]] = None,
) -> Tuple[PPOState, List[Dict[str, float]]]:
  """Runs `config.num_iterations` iterations (fewer if `max_seconds` runs
  out; checked between chunks), `log_every` of them per jitted call.

  Returns the final state and one row per chunk: `env_steps`, `wall_s`
  (from the start, compilation included, as in `run.py`), `return` (mean
  return of the episodes that ended in the chunk, NaN if none), `episodes`,
  `env_steps_per_s` and the loss terms. With `logdir` the rows go to
  TensorBoard at step = iterations done.
  """
  if log_every < 1:
    raise ValueError(f"log_every must be >= 1, got {log_every}")
  ppo = PPO(env, config)
  writer = None
  if logdir is not None:
    from anakin_mz.summary import SummaryWriter

    writer = SummaryWriter(logdir)
  start = time.perf_counter()
  state = jax.jit(ppo.init)(key)
  chunks = {}
  history: List[Dict[str, float]] = []
  done_iters = 0
  try:
    while done_iters < config.num_iterations:
      if max_seconds is not None and time.perf_counter() - start > max_seconds:
        break
      n = min(log_every, config.num_iterations - done_iters)
      if n not in chunks:
        chunks[n] = jax.jit(lambda s, n=n: ppo.iterate_n(s, n))
      t0 = time.perf_counter()
      state, metrics = chunks[n](state)
      metrics = jax.device_get(metrics)
      dt = time.perf_counter() - t0
      done_iters += n
      episodes = int(metrics["episodes"])
      row = {
        "iteration": done_iters,
        "env_steps": done_iters * config.steps_per_iteration,
        "wall_s": time.perf_counter() - start,
        "episodes": episodes,
        "return": float(metrics["return_sum"]) / episodes if episodes else float("nan"),
        "episode_length": float(metrics["length_sum"]) / episodes if episodes else float("nan"),
        "env_steps_per_s": n * config.steps_per_iteration / dt,
      }
      row.update(
        {
          k: float(v)
          for k, v in metrics.items()
          if k not in ("episodes", "return_sum", "length_sum")
        }
      )
      history.append(row)
      if writer is not None:
        writer.scalars(done_iters, _tags(row))
        writer.flush()
      if on_log is not None:
        on_log(row)
  finally:
    if writer is not None:
      writer.close()
  return state, history


def _tags(row: Dict[str, float]) -> Dict[str, float]:
  """A history row under `run.py`'s TensorBoard tags."""
  out = {
    "train/env_steps": row["env_steps"],
    "train/wall_s": row["wall_s"],
    "throughput/env_steps_per_s": row["env_steps_per_s"],
  }
  if row["episodes"]:
    out["selfplay/return_p0"] = row["return"]
    out["selfplay/episode_length"] = row["episode_length"]
  for k in ("loss", "policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction"):
    out[f"train/{k}"] = row[k]
  return out
