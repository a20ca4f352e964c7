"""The device mesh a run is laid out on, and the device-local Anakin step.

A learner (`learner.BaseLearner`: every agent's) describes one global
state: `init(key)`, `init_run(seed)` and `specs(state)`, the `PartitionSpec`
of each leaf over the mesh's one axis, "data" (the self-play lanes and the
replay buffer's lane axis split over the devices, everything else
replicated), and `local_step(state)`, one Anakin step of *one device's*
share of that state. `OnMesh` derives the rest once: the shardings, the
abstract state for restoring a checkpoint, a fresh state laid out on the
mesh, and `jit_step`, `local_step` under `jax.shard_map` and `jax.jit`
(donating the state it steps).

Inside `local_step` each device plays, searches, stores and samples on its
own lanes; it talks to the others only through `psum`/`pmean` here (the
gradient mean and the metric sums) and the one readiness check per chunk.
Nothing in the self-play or search loops synchronises the devices, and no
lane or batch row ever crosses between them (`tests/test_sharding.py`
checks the compiled program). Every random draw that must not depend on
the layout is made for the whole (global) set of lanes or rows and read at
the device's own (`shard_index`, `lane_offset`), so the same seed gives the
same run on any device count, to float rounding.

It imports no other module of the package, so any learner module can use it
without an import cycle.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "data"

# The spec of a leaf split along its lanes: `[B, ...]` lane-major leaves and
# the replay buffer's `[L, B, ...]` ones.
LANES = P(AXIS)
BUFFER_LANES = P(None, AXIS)
REPLICATED = P()


def make_mesh(devices=None) -> Mesh:
  """A one-axis ("data") mesh over `devices` (default: every device of every
  process, `jax.devices()`)."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (AXIS,))


# ---------------------------------------------- inside `local_step` only


def shard_index() -> jax.Array:
  """int32 `[]`: this device's index on the mesh axis (inside `local_step`)."""
  return jax.lax.axis_index(AXIS)


def lane_offset(local_lanes: int) -> jax.Array:
  """int32 `[]`: the global index of this device's first lane."""
  return shard_index() * local_lanes


def psum(tree):
  """The sum over the devices of each leaf of `tree` (metric counts)."""
  return jax.lax.psum(tree, AXIS)


def pmean(tree):
  """The mean over the devices of each leaf of `tree` (gradients, losses):
  each device holds an equal share, so the mean of the devices' means is
  the global mean."""
  return jax.lax.pmean(tree, AXIS)


def all_true(flag: jax.Array) -> jax.Array:
  """bool `[]`: `flag` holds on every device."""
  return jax.lax.pmin(flag.astype(np.int32), AXIS) > 0


class OnMesh:
  """Mixin for a learner with `mesh`, `init`, `init_run`, `specs` and
  `local_step` (see the module doc)."""

  # The spec of the step's metrics: replicated, as `local_step` returns them
  # reduced over the devices (a study with whole seeds on each device,
  # `seeds.SeedAxis`, returns each device's seeds' own instead).
  metrics_spec = REPLICATED

  def shardings(self, state):
    """The `NamedSharding` of each leaf of `state` (a state, or its
    `jax.eval_shape`)."""
    return jax.tree.map(lambda spec: NamedSharding(self.mesh, spec), self.specs(state))

  def _state_shardings(self):
    return self.shardings(jax.eval_shape(self.init, jax.random.PRNGKey(0)))

  def abstract_state(self):
    """Shapes, dtypes and shardings of this learner's state, for restoring a
    checkpoint onto this mesh."""
    shapes = jax.eval_shape(self.init, jax.random.PRNGKey(0))
    return jax.tree.map(
      lambda x, s: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=s),
      shapes,
      self.shardings(shapes),
    )

  def init_sharded(self, seed: int):
    """`init_run(seed)` laid out on the mesh: every device builds its own
    lanes (the same values on any number of devices)."""
    return jax.jit(self.init_run, static_argnums=0, out_shardings=self._state_shardings())(seed)

  def shard(self, state):
    """`state` (host or device arrays of the global state) laid out on the
    mesh."""
    return jax.device_put(state, self.shardings(state))

  def step(self, state):
    """One Anakin step of the global state: `local_step` on every device's
    share (`jax.shard_map`); returns (state, metrics), the metrics laid out
    by `metrics_spec`. Call it through `jit_step`, or inside a jit of your own."""
    specs = self.specs(jax.eval_shape(self.init, jax.random.PRNGKey(0)))
    # check_vma=False: JAX's tracking of device-varying values does not see
    # through the games' `lax.cond`s on mixed inputs. What it would check,
    # that the replicated outputs agree on every device, holds because they
    # are computed from replicated inputs and `pmean`s alone, and
    # tests/test_sharding.py checks the outcome (the same run on 1, 2 and 8
    # devices).
    fn = jax.shard_map(
      self.local_step,
      mesh=self.mesh,
      in_specs=(specs,),
      out_specs=(specs, self.metrics_spec),
      check_vma=False,
    )
    return fn(state)

  @functools.cached_property
  def jit_step(self) -> "DonatingStep":
    """`step` jitted on the mesh: takes and returns the state with
    `shardings` (a state on one device, or on host, is moved there first);
    the metrics come back laid out by `metrics_spec`. It donates the state
    it is given: the new state is written into the old one's buffers, and
    the old one is deleted (`state, metrics = learner.jit_step(state)`;
    copy a state you will read again, `jax.tree.map(jnp.copy, state)`).
    A step that wrote a fresh state would copy the whole of it, replay
    buffer included, every call: on one CPU core 6-8 % of a MinAtar Space
    Invaders step at replays of 16k-64k transitions, 12 % at 262k
    (`copying_step`, `scripts/benchmark_donation.py`)."""
    return DonatingStep(self._jit(donate=True))

  @functools.cached_property
  def copying_step(self):
    """`jit_step` without the donation: the state passed in stays valid,
    and each call copies it (the benchmark's reference)."""
    return self._jit(donate=False)

  def _jit(self, *, donate: bool):
    rep = NamedSharding(self.mesh, self.metrics_spec)
    shardings = self._state_shardings()
    return jax.jit(
      self.step,
      in_shardings=(shardings,),
      out_shardings=(shardings, rep),
      donate_argnums=(0,) if donate else (),
    )


def unaliased(state):
  """`state` with no buffer in two leaves: a leaf whose buffer an earlier
  leaf holds is copied. A donating step refuses a state that holds one
  buffer twice ("donate the same buffer twice"); an `init` that puts one
  array in several fields makes one (`replay.init_buffer`'s counters)."""
  seen = set()

  def one(x):
    if not isinstance(x, jax.Array):
      return x
    buffers = {s.data.unsafe_buffer_pointer() for s in x.addressable_shards}
    if buffers & seen:
      return x.copy()
    seen.update(buffers)
    return x

  return jax.tree.map(one, state)


class DonatingStep:
  """`OnMesh.jit_step`: the jitted step, called on `unaliased(state)`;
  `lower` is the jitted function's (compile it for the run loop, which
  passes states with no shared buffers)."""

  def __init__(self, jitted):
    self.jitted = jitted
    self.lower = jitted.lower

  def __call__(self, state):
    return self.jitted(unaliased(state))
