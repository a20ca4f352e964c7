"""Restoring a trained agent for evaluation: from an Orbax checkpoint, a
params-only model file (`anakin_mz.export`) or a shipped model's name."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import jax

from anakin_mz import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz import export
from anakin_mz.agents import make_learner
from anakin_mz.anakin import Learner, make_mesh
from anakin_mz.types import Params


@dataclasses.dataclass(frozen=True)
class Agent:
  """A restored agent: its config, learner (env + network) and params."""

  config: config_lib.Config
  learner: Learner
  params: Params
  step: int
  meta: Dict[str, object]
  directory: str

  @property
  def env(self):
    return self.learner.env

  @property
  def network(self):
    return self.learner.network


def load_agent(
  directory: str, step: Optional[int] = None, expect_env: Optional[str] = None
) -> Agent:
  """Restores the params and config saved at `step` (default: latest) in
  checkpoint `directory`; or, where `directory` is a model file or the name
  of a shipped model (`export.resolve`), the params and config it holds
  (`step` must then be None).

  Raises:
    CheckpointError: a missing path or step, unreadable metadata or arrays,
      a checkpoint for another game (`expect_env`) or of another env version,
      or arrays that do not fit the saved config's network.
  """
  model_file = export.resolve(directory)
  if model_file is not None:
    return _load_model_file(model_file, step, expect_env)
  meta = ckpt.load_metadata(directory, step)
  try:
    config = config_lib.from_dict(meta["config"])  # type: ignore[arg-type]
  except ValueError as e:
    raise ckpt.CheckpointError(
      f"checkpoint {directory!r} holds a config this code rejects: {e}"
    ) from None
  if expect_env is not None and config.env != expect_env:
    raise ckpt.CheckpointError(
      f"checkpoint {directory!r} is for env {config.env!r}, not {expect_env!r}"
    )
  # Evaluation runs on one device, whatever the training ran on.
  learner = make_learner(config, mesh=make_mesh(jax.local_devices()[:1]))
  ckpt.check_compatible(meta, directory, env_id=learner.env.id, env_version=learner.env.version)
  if ckpt.is_legacy_layout(meta):  # the pmap run loop: a leading device axis
    single = jax.eval_shape(learner.init, jax.random.PRNGKey(0))
    devices = int(meta["num_devices"])  # type: ignore[arg-type]
    template = jax.tree.map(
      lambda x: jax.ShapeDtypeStruct((devices,) + tuple(x.shape), x.dtype), single
    )
    state, meta = ckpt.restore(directory, template, step)
    params = jax.tree.map(lambda x: x[0], state.params)
  else:
    state, meta = ckpt.restore(directory, learner.abstract_state(), step)
    params = state.params
  return Agent(
    config=config,
    learner=learner,
    params=params,
    step=int(meta["step"]),
    meta=meta,
    directory=directory,
  )


def _load_model_file(path: str, step: Optional[int], expect_env: Optional[str]) -> Agent:
  model = export.read(path)
  if step is not None and step != model.step:
    raise ckpt.CheckpointError(
      f"model file {path!r} holds step {model.step} only; drop --step {step}"
    )
  if expect_env is not None and model.config.env != expect_env:
    raise ckpt.CheckpointError(
      f"model file {path!r} is for env {model.config.env!r}, not {expect_env!r}"
    )
  learner = make_learner(model.config, mesh=make_mesh(jax.local_devices()[:1]))
  meta: Dict[str, object] = ckpt.make_metadata(
    model.config.to_dict(), model.env_id, model.env_version, model.step
  )
  ckpt.check_compatible(meta, path, env_id=learner.env.id, env_version=learner.env.version)
  params = export.fit_params(model, learner.abstract_state().params)
  return Agent(
    config=model.config, learner=learner, params=params, step=model.step, meta=meta, directory=path
  )
