"""The learner base every agent's learner extends (`registry.AgentSpec.learner`).

A learner holds one config's game, model and optimizer on a device mesh
and describes one global training state (`init`, `init_run`, `specs`) and
one Anakin step of a device's share of it (`local_step`, returning the
state and a `metrics.StepMetrics`). `mesh.OnMesh` derives the rest: the
shardings, the abstract state for restoring, a fresh state laid out on the
mesh, and `jit_step`. The run loop (`run.train`), the checkpoints and the
evaluation serve every learner alike through this interface.

A state is a chex dataclass with at least `params`, `opt_state`, `key`,
`update_step` and `env_steps` (and its self-play lanes: `actor`, drawn by
`init_actor`, where it keeps `init_run`'s streams); a step checks
its updates with the NaN guard (`guard.guarded`) and applies none of a
chunk that went non-finite.
"""

from __future__ import annotations

from typing import Optional, Tuple

import chex
import jax
import optax
from jax.sharding import Mesh

import envs
from anakin_mz.core import registry
from anakin_mz.runtime import threefry
from anakin_mz.runtime.mesh import OnMesh, make_mesh
from anakin_mz.runtime.metrics import StepMetrics


class BaseLearner(OnMesh):
  """One config's learner on `mesh` (default: `make_mesh()`, every device):
  `env`, `network` (the agent's model, `AgentSpec.model`), `optimizer`.

  Raises:
    ValueError: a global size of `SPLIT` (`train.num_envs`, ...) does not
      divide by the number of devices.
  """

  # The global `train` sizes split evenly over the devices.
  SPLIT: Tuple[str, ...] = ("num_envs",)

  def __init__(self, config, mesh: Optional[Mesh] = None):
    # The PRNG's hash without its CPU loop: the same numbers, a shorter
    # chain of kernels per step (`threefry.py`).
    threefry.unroll_on_cpu()
    self.config = config
    self.mesh = make_mesh() if mesh is None else mesh
    self.num_devices = int(self.mesh.size)
    for name in self.SPLIT:
      value = getattr(config.train, name)
      if value % self.num_devices:
        raise ValueError(
          f"train.{name}={value} does not divide over {self.num_devices} devices: "
          f"{name} is global and is split evenly over the devices; use a multiple of "
          f"{self.num_devices} or another device count (train.py --devices)"
        )
    self.agent = registry.get(config.agent)
    self.env: envs.Env = config.make_env()
    self.network = self.agent.model(config, self.env)
    self.optimizer = self.make_optimizer()

  def make_optimizer(self) -> optax.GradientTransformation:
    """Adam with global-norm clipping, at `train`'s learning rate (schedule)."""
    tc = self.config.train
    return optax.chain(
      optax.clip_by_global_norm(tc.max_grad_norm), optax.adam(tc.learning_rate_schedule())
    )

  # ---------------------------------------------------------------- state
  def init(self, key: chex.Array):
    """A fresh single-device state for PRNG `key` (either flavour)."""
    raise NotImplementedError

  def init_actor(self, params: chex.ArrayTree, key: chex.Array):
    """The state's self-play lanes (`actor`), fresh, for `key`."""
    raise NotImplementedError

  def init_run(self, seed: int):
    """The run loop's fresh state for `seed`: `init(PRNGKey(seed))` with the
    lanes and the run key drawn from `PRNGKey(seed + 1)` (the streams of
    the earlier one-device run loop, so its runs keep their numbers)."""
    base = self.init(jax.random.PRNGKey(seed))
    k_actor, k_run = jax.random.split(jax.random.split(jax.random.PRNGKey(seed + 1), 1)[0])
    return base.replace(actor=self.init_actor(base.params, k_actor), key=k_run)

  def specs(self, state):
    """The `PartitionSpec` of each leaf of `state` (or its `jax.eval_shape`)."""
    raise NotImplementedError

  # ---------------------------------------------------------------- step
  def local_step(self, state) -> Tuple[object, StepMetrics]:
    """One Anakin step of this device's share of `state` (call it through
    `jit_step`, which runs it on every device)."""
    raise NotImplementedError
