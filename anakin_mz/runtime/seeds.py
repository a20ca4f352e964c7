"""A study: N independent runs of one config, one per seed, trained as one
compiled program (issue 64).

`SeedAxis` wraps a learner (`learner.BaseLearner`, any agent's) and gives
its whole state, params, optimizer state, replay, self-play lanes, key and
counters, a leading seed axis `[S, ...]`: the state is
`jax.vmap(learner.init_run)(seeds)`, and one step is
`jax.vmap(learner.local_step)` on every device's share of it
(`mesh.OnMesh.step`), as purejaxrl trains `jax.vmap(make_train(config))(keys)`.
Nothing else changes: each seed plays, searches, stores and learns exactly
as the learner does alone, so seed S of a study is the run of
`single(config, S)` to float rounding (`tests/test_seeds.py`). On an
accelerator, where a step's time is its chain of small kernels, S seeds
cost about what one does (`scripts/benchmark_scale.py --seeds`).

Devices: the seed axis is never split; the lanes of every seed are split
over the mesh as in a single run (`learner.specs` with `None` in front), so
each device holds its lanes of every seed, and the collectives (the
gradient mean, the counts) run per seed.

Outputs: each seed is an ordinary run under `<logdir>/seed<S>`
(`run_dirs`): its TensorBoard scalars, its checkpoints (the state of that
seed alone, saved with the config `single(config, S)`), so `evaluate`,
`export` and a single-seed `--resume` take one seed's directory as for any
run. The run loop (`run.train_seeds`) slices the state per seed to save it
(`take`) and stacks the seeds' states to resume (`stack`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import List, Sequence, Tuple

import chex
import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from anakin_mz.config import Config
from anakin_mz.runtime.mesh import OnMesh
from envs.core import raw_key


def single(config: Config, seed: int) -> Config:
  """The config of seed `seed` of `config`'s study as a run of its own:
  `seed` set, `train.seeds` empty (what each seed's checkpoints record)."""
  return dataclasses.replace(config, seed=seed, train=dataclasses.replace(config.train, seeds=()))


def run_dirs(logdir: str, config: Config) -> List[str]:
  """The run directories of `config` under `logdir`: `[logdir]` for one
  run, `<logdir>/seed<S>` for each seed of a study."""
  if not config.train.seeds:
    return [logdir]
  return [os.path.join(logdir, f"seed{s}") for s in config.train.seeds]


def _prefixed(spec: P) -> P:
  return P(None, *spec)


class SeedAxis(OnMesh):
  """`learner` (on its mesh) for each of `seeds` at once: the state and
  step of a study (module doc). `env`, `network`, `agent`, `num_devices`,
  `transitions_per_chunk` and `updates_per_chunk` are the learner's, per
  seed.

  Raises:
    ValueError: no seeds, or seeds that are not distinct integers >= 0.
  """

  def __init__(self, learner, seeds: Sequence[int]):
    seeds = tuple(int(s) for s in seeds)
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
      raise ValueError(f"a study needs distinct seeds >= 0, got {list(seeds)}")
    self.learner = learner
    self.seeds = seeds
    self.mesh = learner.mesh
    self.config = learner.config
    self.num_devices = learner.num_devices
    self.env = learner.env
    self.network = learner.network
    self.agent = learner.agent
    self.transitions_per_chunk = learner.transitions_per_chunk
    self.updates_per_chunk = getattr(learner, "updates_per_chunk", 1)

  # ---------------------------------------------------------------- state
  def init(self, key: chex.Array):
    """A state of the study's shapes `[S, ...]`, one learner `init` per seed
    from `key` (shapes and tests; a run starts from `init_run`)."""
    keys = jax.random.split(raw_key(key), len(self.seeds))
    return jax.vmap(self.learner.init)(keys)

  def init_run(self, seeds: Tuple[int, ...]):
    """The learner's `init_run(s)` for each `s` of `seeds`, stacked: the
    fresh state of each seed's own run. (`OnMesh.init_sharded(self.seeds)`
    lays it out on the mesh.)"""
    return jax.vmap(self.learner.init_run)(jnp.asarray(seeds, jnp.int32))

  def specs(self, state):
    """The learner's `PartitionSpec`s with the seed axis in front, never
    split: `P(None, *spec)` (`state` gives the structure only)."""
    del state
    inner = self.learner.specs(jax.eval_shape(self.learner.init, jax.random.PRNGKey(0)))
    return jax.tree.map(_prefixed, inner, is_leaf=lambda x: isinstance(x, P))

  # ---------------------------------------------------------------- step
  def local_step(self, state):
    """The learner's `local_step` of this device's share of every seed
    (`jax.vmap`); the metrics gain the seed axis too (`[S, ...]`)."""
    return jax.vmap(self.learner.local_step)(state)

  # ------------------------------------------------- one seed <-> the study
  @functools.cached_property
  def _take(self):
    shardings = self.learner.shardings(jax.eval_shape(self.learner.init, jax.random.PRNGKey(0)))
    return jax.jit(lambda state, i: jax.tree.map(lambda x: x[i], state), out_shardings=shardings)

  def take(self, state, index: int):
    """Seed `self.seeds[index]`'s state, sliced from the study's `state`
    and laid out as the learner's own (what its checkpoints hold)."""
    return self._take(state, jnp.int32(index))

  @functools.cached_property
  def _stack(self):
    return jax.jit(
      lambda states: jax.tree.map(lambda *xs: jnp.stack(xs), *states),
      out_shardings=self._state_shardings(),
    )

  def stack(self, states: Sequence[object]):
    """The study's state from one learner state per seed, in `seeds` order."""
    return self._stack(tuple(states))

  @functools.cached_property
  def _keep(self):
    def keep(active, new, old):
      def pick(n, o):
        return jnp.where(active.reshape(active.shape + (1,) * (n.ndim - 1)), n, o)

      return jax.tree.map(pick, new, old)

    shardings = self._state_shardings()
    return jax.jit(keep, out_shardings=shardings)

  def keep(self, active: chex.Array, new, old):
    """`new` for the seeds where `active` (bool `[S]`), `old` for the
    others: a seed that reached its budget stops there while the others
    step on."""
    return self._keep(jnp.asarray(active), new, old)
