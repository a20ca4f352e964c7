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

Devices: a study on D > 1 devices lies on them in one of two layouts
(`train.seed_layout`, chosen by `choose_layout`):

* `lanes`: the seed axis is not split; the lanes of every seed are split
  over the mesh as in a single run (`learner.specs` with `None` in front),
  so each device holds its lanes of every seed, and the collectives (the
  gradient mean, the counts) run per seed across the devices;
* `seeds`: the seed axis is split over the devices and each holds whole
  learners, S / D seeds each (the seeds must divide over the devices). The
  learner lives on a one-device mesh and the study on a ("seeds", "data")
  mesh of D x 1 devices, so the learner's collectives over "data" span one
  device: nothing crosses between the devices in a step.

Every draw is made for a seed's global lanes and rows (`mesh.py`), so the
layout does not change the numbers: seed S is `single(config, S)`'s run in
either (`tests/test_seeds.py`). `auto` takes `seeds` where the seeds divide
over the devices, by a rule, not a measurement (`choose_layout`).

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
from typing import List, Optional, Sequence, Tuple

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from anakin_mz.config import SEED_LAYOUTS, Config
from anakin_mz.core import registry
from anakin_mz.runtime.mesh import AXIS, OnMesh, make_mesh
from envs.core import raw_key

# The mesh axis a study's seeds are split over in the `seeds` layout.
SEED_AXIS = "seeds"


def single(config: Config, seed: int) -> Config:
  """The config of seed `seed` of `config`'s study as a run of its own:
  `seed` set, `train.seeds` empty and `train.seed_layout` its default (what
  each seed's checkpoints record: the layout does not change the run, so a
  study resumes in either)."""
  train = dataclasses.replace(config.train, seeds=(), seed_layout="auto")
  return dataclasses.replace(config, seed=seed, train=train)


@dataclasses.dataclass(frozen=True)
class Layout:
  """How a study of `num_seeds` seeds lies on `num_devices` devices.

  Attributes:
    name: "seeds" (the seed axis split over the devices, whole learners on
      each) or "lanes" (each seed's lanes split over them, as one run's).
    num_seeds: S.
    num_devices: D.
    why: what chose it (`train.seed_layout`, or the `auto` rule).
  """

  name: str
  num_seeds: int
  num_devices: int
  why: str

  def line(self) -> str:
    """One line for the console: the layout, what each device holds, why."""
    if self.name == "seeds":
      held = f"each of {self.num_devices} devices holds {self.num_seeds // self.num_devices}"
      held += " whole seed(s)"
    elif self.num_devices == 1:
      held = "one device holds every seed"
    else:
      held = f"each seed's lanes split over {self.num_devices} devices"
    return f"seed layout: {self.name} ({held}; {self.why})"


def device_counts(num_seeds: int) -> List[int]:
  """The device counts `num_seeds` seeds divide over (the `seeds` layout's)."""
  return [d for d in range(1, num_seeds + 1) if num_seeds % d == 0]


def choose_layout(
  requested: str, num_seeds: int, num_devices: int, num_processes: int = 1
) -> Layout:
  """The layout of a study of `num_seeds` seeds on `num_devices` devices (of
  `num_processes` processes) for `train.seed_layout` `requested`.

  `auto` is a rule, not a measurement (`--devices auto` measures nothing
  at run time either; its one device per core was measured once,
  `host.py`): `seeds` where the seeds divide over the devices, else
  `lanes`. Both give each device the same work (S seeds' lanes over D
  devices), but in `seeds` a device steps its learners alone, where
  `lanes` meets the other devices at every gradient mean and count of
  every update, and keeps every seed's params and optimizer state on every
  device; on one device the two are one program, and `auto` keeps the
  single run's (`lanes`). Several processes take `lanes`: the run loop
  reads every seed's counters, metrics and params in each process, which
  holds only its own devices' seeds in `seeds`.

  Raises:
    ValueError: `requested` is not one of `SEED_LAYOUTS`; `seeds` where
      the seeds do not divide over the devices (naming the counts they do),
      or over several processes.
  """
  if requested not in SEED_LAYOUTS:
    raise ValueError(
      f"train.seed_layout must be one of {', '.join(SEED_LAYOUTS)}, got {requested!r}"
    )
  if num_processes > 1:
    if requested == "seeds":
      raise ValueError(
        f"train.seed_layout=seeds runs in one process, not {num_processes}: the run loop "
        "reads every seed's values in each; use train.seed_layout=lanes or auto"
      )
    why = f"{requested}: {num_processes} processes, which each read every seed's values"
    return Layout("lanes", num_seeds, num_devices, why)
  divides = num_seeds % num_devices == 0
  if requested == "seeds" and not divides:
    raise ValueError(
      f"train.seed_layout=seeds puts whole seeds on each device: {num_seeds} seeds do not "
      f"divide over {num_devices} devices; use {_or(device_counts(num_seeds))} devices "
      "(--devices N), or train.seed_layout=lanes (each seed's lanes split over the devices)"
    )
  if requested != "auto":
    return Layout(requested, num_seeds, num_devices, f"train.seed_layout={requested}")
  if num_devices == 1:
    why = "auto: one device, where the layouts are one program"
    return Layout("lanes", num_seeds, num_devices, why)
  if divides:
    why = (
      f"auto: {num_seeds} seeds divide over {num_devices} devices, and whole seeds per "
      "device step without cross-device traffic (a rule, not measured)"
    )
    return Layout("seeds", num_seeds, num_devices, why)
  why = f"auto: {num_seeds} seeds do not divide over {num_devices} devices"
  return Layout("lanes", num_seeds, num_devices, why)


def _or(values: Sequence[int]) -> str:
  text = [str(v) for v in values]
  return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} or {text[-1]}"


def make_study(config: Config, mesh: Optional[Mesh] = None) -> "SeedAxis":
  """The study of `config.train.seeds` on `mesh`'s devices (default: every
  device) in the layout `choose_layout` gives for `train.seed_layout`: its
  learner on the whole mesh (`lanes`) or on its first device (`seeds`).

  Raises:
    ValueError: as `choose_layout`; a config without `train.seeds`; the
      learner's (sizes that do not divide over the devices, in `lanes`).
  """
  if not config.train.seeds:
    raise ValueError("a study needs train.seeds")
  mesh = make_mesh() if mesh is None else mesh
  layout = choose_layout(
    config.train.seed_layout, len(config.train.seeds), int(mesh.size), jax.process_count()
  )
  if layout.name == "lanes":
    return SeedAxis(registry.make_learner(config, mesh), config.train.seeds, layout=layout)
  devices = list(mesh.devices.flat)
  learner = registry.make_learner(config, make_mesh(devices[:1]))
  return SeedAxis(learner, config.train.seeds, devices=devices, layout=layout)


def run_dirs(logdir: str, config: Config) -> List[str]:
  """The run directories of `config` under `logdir`: `[logdir]` for one
  run, `<logdir>/seed<S>` for each seed of a study."""
  if not config.train.seeds:
    return [logdir]
  return [os.path.join(logdir, f"seed{s}") for s in config.train.seeds]


class SeedAxis(OnMesh):
  """`learner` for each of `seeds` at once: the state and step of a study
  (module doc). `devices` None: the `lanes` layout, on the learner's mesh;
  a list of devices: the `seeds` layout, the seed axis split over them (the
  learner's mesh must be one device). `layout` is what chose it (default:
  the layout, named as given). `env`, `network`, `agent`, `num_devices`,
  `transitions_per_chunk` and `updates_per_chunk` are the learner's, per
  seed.

  Raises:
    ValueError: no seeds, or seeds that are not distinct integers >= 0;
      `devices` the seeds do not divide over, or a learner on several.
  """

  def __init__(
    self,
    learner,
    seeds: Sequence[int],
    devices: Optional[Sequence[jax.Device]] = None,
    layout: Optional[Layout] = None,
  ):
    seeds = tuple(int(s) for s in seeds)
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
      raise ValueError(f"a study needs distinct seeds >= 0, got {list(seeds)}")
    self.learner = learner
    self.seeds = seeds
    if devices is None:
      self.mesh = learner.mesh
      self._lead = None  # the seed axis is not split
      name = "lanes"
    else:
      devices = list(devices)
      if learner.mesh.size != 1:
        raise ValueError(
          "the seeds layout holds whole learners on each device: the learner's mesh must "
          f"be one device, got {learner.mesh.size}"
        )
      choose_layout("seeds", len(seeds), len(devices))  # raises where they do not divide
      # "data" of size 1: the learner's collectives and lane offsets see one
      # device, as in its single run on one device.
      self.mesh = Mesh(np.asarray(devices).reshape(len(devices), 1), (SEED_AXIS, AXIS))
      self._lead = SEED_AXIS
      # Each device's metrics are its own seeds' (reduced over "data" alone).
      self.metrics_spec = P(SEED_AXIS)
      name = "seeds"
    self.layout = layout or Layout(name, len(seeds), int(self.mesh.size), "as given")
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

  def _inner_specs(self):
    return self.learner.specs(jax.eval_shape(self.learner.init, jax.random.PRNGKey(0)))

  def specs(self, state):
    """The learner's `PartitionSpec`s with the seed axis in front: `P(None,
    *spec)` in the `lanes` layout, `P("seeds", *spec)` in `seeds` (`state`
    gives the structure only)."""
    del state
    lead = self._lead
    return jax.tree.map(
      lambda spec: P(lead, *spec), self._inner_specs(), is_leaf=lambda x: isinstance(x, P)
    )

  def seed_shardings(self):
    """The sharding of each leaf of one seed's state as `take` gives it and
    `stack` takes it: the learner's specs on the study's mesh (in the
    `seeds` layout, a copy on every device of it)."""
    return jax.tree.map(
      lambda spec: NamedSharding(self.mesh, spec),
      self._inner_specs(),
      is_leaf=lambda x: isinstance(x, P),
    )

  def seed_abstract_state(self):
    """Shapes, dtypes and shardings of one seed's state (`seed_shardings`),
    for restoring a seed's checkpoint into the study."""
    shapes = jax.eval_shape(self.learner.init, jax.random.PRNGKey(0))
    return jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      shapes,
      self.seed_shardings(),
    )

  # ---------------------------------------------------------------- step
  def local_step(self, state):
    """The learner's `local_step` of this device's share of every seed
    (`jax.vmap`); the metrics gain the seed axis too (`[S, ...]`)."""
    return jax.vmap(self.learner.local_step)(state)

  # ------------------------------------------------- one seed <-> the study
  @functools.cached_property
  def _take(self):
    shardings = self.seed_shardings()
    return jax.jit(lambda state, i: jax.tree.map(lambda x: x[i], state), out_shardings=shardings)

  def take(self, state, index: int):
    """Seed `self.seeds[index]`'s state, sliced from the study's `state`
    and laid out by `seed_shardings` (the learner's own layout in `lanes`;
    what its checkpoints hold)."""
    return self._take(state, jnp.int32(index))

  @functools.cached_property
  def _stack(self):
    return jax.jit(
      lambda states: jax.tree.map(lambda *xs: jnp.stack(xs), *states),
      out_shardings=self._state_shardings(),
    )

  def stack(self, states: Sequence[object]):
    """The study's state from one learner state per seed (laid out by
    `seed_shardings`), in `seeds` order."""
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
