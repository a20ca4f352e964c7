"""The device mesh a run is laid out on, and what a learner needs to run on it.

A learner (`anakin.Learner`, `tdlambda.TDLambdaLearner`) describes one global
state: `init(key)`, `init_run(seed)`, `step(state)` and `shardings(state)`,
the `NamedSharding` of each leaf on its `mesh`. `OnMesh` derives the rest
from those once: the abstract state for restoring a checkpoint, a fresh
state laid out on the mesh, and the jitted step. It imports no other module
of the package, so any learner module can use it without an import cycle.
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

AXIS = "data"


def make_mesh(devices=None) -> Mesh:
  """A one-axis ("data") mesh over `devices` (default: every device of every
  process, `jax.devices()`)."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (AXIS,))


class OnMesh:
  """Mixin for a learner with `mesh`, `init`, `init_run`, `shardings` and
  `step` (see the module doc)."""

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

  @functools.cached_property
  def jit_step(self):
    """`step` jitted on the mesh: takes and returns the state with
    `shardings` (a state on one device, or on host, is moved there first);
    the metrics come back replicated."""
    rep = NamedSharding(self.mesh, P())
    shardings = self._state_shardings()
    return jax.jit(self.step, in_shardings=(shardings,), out_shardings=(shardings, rep))
