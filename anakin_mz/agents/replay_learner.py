"""The replay learner of NDMZ, AlphaZero and Stochastic MuZero: one Anakin
step, self-play chunk -> replay -> N gradient updates, as a single jitted
function, in the style of Stoix's `get_learner_fn`. Everything a run needs
lives in `TrainState`, so a checkpoint of it resumes a run exactly.

Devices: `TrainState` is the global state (all `num_envs` lanes, one replay
buffer with a ring per lane, one run key), laid out over a
`jax.sharding.Mesh` of every device with one data-parallel axis (`runtime/mesh.py`):
the self-play lanes and the buffer's lanes are split over the devices,
parameters, optimizer state, the run key and the counters are replicated.
`Learner.local_step` is the step of one device's share, run on every
device at once under `jax.shard_map` (`OnMesh.jit_step`): each device plays
and searches its own lanes, writes them to its own rings, and draws and
builds its N/D rows of each update's batch from them (the draw is
stratified by lane, `replay.sample_starts`), reanalyse included. The only
collectives are the mean of the gradients and losses over the devices, the
sums of the self-play counts, and one readiness check per chunk. The same
seed gives the same run on any device count, multi-host included
(`runtime/host.py`), to float rounding (`tests/test_sharding.py`). `num_envs` and
`batch_size` are global and must divide by the device count.
"""

from __future__ import annotations

import functools
from typing import Tuple

import chex
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

from anakin_mz.core import lookahead
from anakin_mz.core import reanalyse as reanalyse_lib
from anakin_mz.core import replay as replay_lib
from anakin_mz.config import Config
from anakin_mz.core.loss import ndmz_loss
from anakin_mz.core.registry import LOOKAHEAD, unsupported_reason
from anakin_mz.runtime import mesh as mesh_lib
from anakin_mz.runtime.guard import guarded
from anakin_mz.runtime.learner import BaseLearner
from anakin_mz.runtime.metrics import StepMetrics, search_stats
from anakin_mz.core.selfplay import ActorState, init_actors, rollout
from envs.core import raw_key


@chex.dataclass(frozen=True)
class TrainState:
  """Everything a run needs to continue (global arrays).

  Attributes:
    params: network parameters (replicated across devices).
    opt_state: optax state (replicated).
    buffer: the replay buffer, `[L, num_envs, ...]` (lanes split over devices).
    actor: the self-play lanes, `[num_envs, ...]` (split over devices).
    key: `[2]` uint32 PRNG key of the run (replicated).
    update_step: int32 `[]` gradient updates done.
    env_steps: int32 `[]` transitions generated (all lanes).
  """

  params: chex.ArrayTree
  opt_state: chex.ArrayTree
  buffer: chex.ArrayTree
  actor: ActorState
  key: chex.Array
  update_step: chex.Array
  env_steps: chex.Array


class Learner(BaseLearner):
  """The Anakin learner of the agents that search with a model and learn
  from a replay buffer (`ndmz`, and `alphazero` and `stochastic_muzero`,
  which override the loss and, SMZ, the sampling): the training state and
  the jitted Anakin step for one config, on `mesh` (default: `make_mesh()`,
  every device). The model is the agent's (`AgentSpec.model`), self-play
  runs the agent's search (`AgentSpec.search`); the loss is NDMZ's unless a
  subclass overrides `_loss`.

  Raises:
    ValueError: `train.num_envs` or `train.batch_size` does not divide by
      the number of devices.
  """

  SPLIT = ("num_envs", "batch_size")
  # Whether the loss reads `loss.sibling_value_weight` (NDMZ's does; a
  # subclass whose loss does not, leaves self-play without the lookahead).
  READS_SIBLINGS = True

  def __init__(self, config: Config, mesh: Mesh | None = None):
    super().__init__(config, mesh)
    self.siblings = self.READS_SIBLINGS and config.loss.sibling_value_weight > 0
    if self.siblings and not LOOKAHEAD.supports(self.env):
      raise ValueError(
        f"loss.sibling_value_weight > 0 values every legal move one ply deep on the real "
        f"game, which {self.env.id} does not allow ({unsupported_reason(self.env)}); "
        "set it to 0"
      )
    if config.train.selfplay_player == "value" and not self.siblings:
      raise ValueError(
        f"train.selfplay_player 'value' plays by the sibling values, which agent "
        f"{config.agent!r} does not compute: set selfplay_player to 'search'"
      )
    # Raises where the reanalysed samples do not split over the devices.
    reanalyse_lib.reanalysed_rows(
      config.train.batch_size, config.train.reanalyse_rows, self.num_devices
    )
    tc = config.train
    self.transitions_per_chunk = tc.rollout_length * tc.num_envs
    self.updates_per_chunk = tc.updates_per_chunk(self.transitions_per_chunk)

  # ---------------------------------------------------------------- state
  def init(self, key: chex.Array) -> TrainState:
    """A fresh single-device TrainState for PRNG `key` (either flavour,
    `envs.core.raw_key`; the state keeps raw keys)."""
    tc = self.config.train
    # Four keys, the third unused, keep the streams of saved runs.
    k_params, k_actor, _, k_run = jax.random.split(raw_key(key), 4)
    params = self.network.init(k_params)
    actor = init_actors(self.env, k_actor, tc.num_envs)
    example = replay_lib.example_transition(
      self.env, legal_mask=tc.reanalyse_fraction > 0, siblings=self.siblings
    )
    buffer = replay_lib.init_buffer(example, tc.replay_capacity, tc.num_envs)
    return TrainState(
      params=params,
      opt_state=self.optimizer.init(params),
      buffer=buffer,
      actor=actor,
      key=k_run,
      update_step=jnp.int32(0),
      env_steps=jnp.int32(0),
    )

  def specs(self, state) -> TrainState:
    """The `PartitionSpec` of each leaf of `state` (a `TrainState`, or its
    `jax.eval_shape`): lanes split over the mesh's data axis (the actor's
    `[B, ...]` leaves, the buffer's `[L, B, ...]` data and `[B]` counters),
    all else replicated."""
    like = lambda tree, spec: jax.tree.map(lambda _: spec, tree)
    buffer = like(state.buffer, mesh_lib.BUFFER_LANES)
    lanes = mesh_lib.LANES
    return like(state, mesh_lib.REPLICATED).replace(
      actor=like(state.actor, lanes),
      buffer=buffer.replace(write=lanes, count=lanes, added=lanes),
    )

  def init_actor(self, params, key: chex.Array) -> ActorState:
    del params
    return init_actors(self.env, key, self.config.train.num_envs)

  # ---------------------------------------------------------------- step
  def temperature(self, update_step: chex.Array) -> chex.Array:
    """Self-play temperature `[]` after `update_step` updates: linear from
    temperature_start to temperature_end over temperature_decay_updates
    (total_updates when 0), then constant."""
    tc = self.config.train
    span = tc.temperature_decay_updates or tc.total_updates
    frac = jnp.clip(update_step / span, 0.0, 1.0)
    return tc.temperature_start + frac * (tc.temperature_end - tc.temperature_start)

  def _loss(self, params, batch):
    return ndmz_loss(params, self.network, batch, self.config.loss, discount=self.config.discount)

  def _sibling_fn(self):
    """The self-play `SiblingFn` of the sibling-value term (the value
    head's values of every legal move in an expectimax of
    `loss.sibling_depth` moves on the real game), or None where it is off."""
    if not self.siblings:
      return None

    def siblings(params, state):
      policy = self.agent.value_policy(
        self.network,
        params,
        self.env,
        discount=self.config.discount,
        depth=self.config.loss.sibling_depth,
      )
      return lookahead.siblings(policy, state, lane_stride=self.config.loss.sibling_lane_stride)

    return siblings

  def _prepare(self, buffer):
    """The targets of the whole buffer, derived once per chunk (the buffer
    is fixed during the updates); what `_sample` draws from. Its `start_ok`
    says where a sample may start."""
    tc = self.config.train
    return replay_lib.prepare(
      buffer,
      K=tc.unroll_steps,
      num_players=self.env.num_players,
      payoff=self.env.payoff,
      td_steps=tc.td_steps,
      discount=self.config.discount,
      value_lambda=tc.value_lambda,
      bootstrap=tc.value_bootstrap,
    )

  def _sample(self, params, prepared, key):
    """One update's batch, this device's rows of it, drawn from `_prepare`'s
    output with `key` (the same key on every device)."""
    tc = self.config.train
    shard = dict(shard=mesh_lib.shard_index(), num_shards=self.num_devices)
    starts = replay_lib.sample_starts(prepared, key, tc.batch_size, **shard)
    batch = replay_lib.targets_at(
      prepared,
      starts,
      batch_size=tc.batch_size,
      K=tc.unroll_steps,
      num_players=self.env.num_players,
      num_actions=self.env.num_actions,
    )
    # Fresh targets for train.reanalyse_fraction of the batch (none at 0: no search).
    return reanalyse_lib.refresh(
      params,
      prepared,
      batch,
      starts,
      key,
      network=self.network,
      env=self.env,
      search=self.config.search,
      num_rows=self.config.train.reanalyse_rows,
      td_steps=self.config.train.td_steps,
      discount=self.config.discount,
      num_shards=self.num_devices,
    )

  def _ready(self, buffer, prepared) -> chex.Array:
    """bool `[]`, the same on every device: updates may start (every lane
    holds `min_replay` steps, every row of the batch has a start)."""
    tc = self.config.train
    local = (jnp.min(buffer.count) >= tc.min_replay) & replay_lib.starts_everywhere(
      prepared.start_ok,
      tc.batch_size,
      shard=mesh_lib.shard_index(),
      num_shards=self.num_devices,
    )
    return mesh_lib.all_true(local)

  def _update(self, carry, key, *, prepared):
    params, opt_state = carry
    batch = self._sample(params, prepared, key)
    # Data parallelism: each device's loss is the mean over its N/D rows; the
    # mean of the devices' gradients is the gradient of the global mean.
    (loss, metrics), grads = jax.value_and_grad(self._loss, has_aux=True)(params, batch)
    grads, loss, metrics = mesh_lib.pmean((grads, loss, metrics))
    updates, opt_state = self.optimizer.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    metrics = dict(metrics, loss=loss, grad_norm=optax.tree.norm(grads))
    return (params, opt_state), metrics

  def local_step(self, state: TrainState) -> Tuple[TrainState, StepMetrics]:
    """One Anakin step of this device's share of the state (call it through
    `jit_step`, which runs it on every device).

    Self-play `rollout_length` transitions in every lane, add them to the
    buffer, then make `updates_per_chunk` gradient updates once the buffer
    holds `min_replay` steps per lane (before that, updates are computed but
    not applied, keeping one compiled program).

    NaN/inf guard: if any update's loss term, loss or gradient norm, or the
    resulting parameters, is non-finite, the chunk's updates are not applied
    (params and optimizer state keep their last finite values, so a state is
    never non-finite) and the metrics' `nonfinite` (bool `[]` per term,
    `loss`, `grad_norm` and `params`) and `nonfinite_update` (the first bad
    update's index in the chunk, -1 if none) report it (`guard.guarded`).
    The run loop stops on it; there is no host sync per update.
    """
    tc = self.config.train
    key, k_roll, k_upd = jax.random.split(state.key, 3)
    local_lanes = state.actor.episode_length.shape[0]
    actor, records, stats = rollout(
      state.params,
      state.actor,
      k_roll,
      env=self.env,
      network=self.network,
      config=self.config.search,
      num_steps=tc.rollout_length,
      temperature=self.temperature(state.update_step),
      search=self.agent.search,
      search_at_chance=tc.search_at_chance,
      lane0=mesh_lib.lane_offset(local_lanes),
      total_lanes=tc.num_envs,
      siblings=self._sibling_fn(),
      play_siblings=tc.selfplay_player == "value",
    )
    stats = mesh_lib.psum(stats)
    buffer = replay_lib.add(state.buffer, records, drop_invalid=True)
    # The buffer is fixed during the updates: derive its targets once.
    prepared = self._prepare(buffer)
    ready = self._ready(buffer, prepared)
    update = functools.partial(self._update, prepared=prepared)
    (params, opt_state), metrics = jax.lax.scan(
      update, (state.params, state.opt_state), jax.random.split(k_upd, self.updates_per_chunk)
    )
    # A chunk with any non-finite value is not applied: params and optimizer
    # state keep their last finite values, and `nonfinite` reports it.
    params, opt_state, applied, nonfinite, first_bad = guarded(
      metrics, params, opt_state, state.params, state.opt_state, ready
    )
    done_updates = jnp.where(applied, self.updates_per_chunk, 0)
    metrics = StepMetrics(
      episodes=stats.episodes,
      return_sum=stats.return_sum,
      length_sum=stats.length_sum,
      decision_steps=stats.decision_steps,
      transitions=stats.transitions,
      updates_applied=done_updates,
      terms=jax.tree.map(jnp.mean, metrics),
      nonfinite=nonfinite,
      nonfinite_update=first_bad,
      search=search_stats(
        stats.searches, stats.decision_steps, self.temperature(state.update_step)
      ),
    )
    new_state = TrainState(
      params=params,
      opt_state=opt_state,
      buffer=buffer,
      actor=actor,
      key=key,
      update_step=state.update_step + done_updates,
      env_steps=state.env_steps + stats.transitions,
    )
    return new_state, metrics
