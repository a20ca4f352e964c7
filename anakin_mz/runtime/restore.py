"""Restoring a trained agent for evaluation, from an Orbax checkpoint, a
params-only model file (`export`) or a shipped model's name: its config,
its model (`AgentSpec.model`) and its parameters, read alone (no learner is
built)."""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import jax

import envs
from anakin_mz import config as config_lib
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export
from anakin_mz.core import players, registry
from anakin_mz.core.search import SearchConfig
from anakin_mz.core.types import Model, Params


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
  """A restored agent: its config, game, model (`network`) and params, and
  its players (`AgentSpec`'s, with these params). `agent_kind` is the player
  evaluate and play use unless --player says otherwise: a model file's own
  (`export.Model.agent_kind`), else the search."""

  config: config_lib.Config
  env: envs.Env
  network: Model
  params: Params
  step: int
  meta: Dict[str, object]
  directory: str
  agent_kind: str = players.DEFAULT_PLAYER

  @property
  def spec(self) -> registry.AgentSpec:
    """The agent's registration (`config.agent`)."""
    return registry.get(self.config.agent)

  def search_policy(self, search: Optional[SearchConfig] = None) -> envs.Policy:
    """Its greedy player (`AgentSpec.search_policy`) with `search` (default
    its config's)."""
    search = self.config.playing_search if search is None else search
    return self.spec.search_policy(self.network, self.params, self.env, search)

  def greedy_policy(self) -> envs.Policy:
    """Its network's greedy choice (`AgentSpec.greedy`)."""
    return self.spec.greedy(self.network, self.params)

  def value_policy(self, search: Optional[SearchConfig] = None) -> envs.OnePlyPolicy:
    """Its value in an expectimax of `search.expectimax_depth` moves
    (`AgentSpec.value_policy`; `search` default its config's)."""
    search = self.config.playing_search if search is None else search
    return self.spec.value_policy(
      self.network,
      self.params,
      self.env,
      discount=self.config.discount,
      depth=search.expectimax_depth,
    )


def load_agent(
  directory: str, step: Optional[int] = None, expect_env: Optional[str] = None
) -> Agent:
  """Restores the params and config saved at `step` (default: latest) in
  checkpoint `directory` (or a run's logdir, whose `checkpoints` it reads:
  `checkpoint.locate`), on one device (evaluation runs there, whatever the
  training ran on); or, where `directory` is a model file or the name of a
  shipped model (`export.resolve`), the params and config it holds (`step`
  must then be None or its step).

  Raises:
    CheckpointError: a missing path or step, unreadable metadata or arrays,
      a checkpoint for another game (`expect_env`) or of another env version,
      arrays that do not fit the saved config's network, or an older format
      (naming `anakin-mz migrate`).
  """
  model_file = export.resolve(directory)
  if model_file is not None:
    return _load_model_file(model_file, step, expect_env)
  directory = ckpt.locate(directory)  # a run's logdir: its checkpoints
  meta = ckpt.load_metadata(directory, step)
  ckpt.check_format(meta, directory)
  config = ckpt.saved_config(meta["config"], "checkpoint", directory)
  if expect_env is not None and config.env != expect_env:
    raise ckpt.CheckpointError(
      f"checkpoint {directory!r} is for env {config.env!r}, not {expect_env!r}"
    )
  env = config.make_env()
  ckpt.check_compatible(meta, directory, env_id=env.id, env_version=env.version)
  network = registry.get(config.agent).model(config, env)
  shapes = jax.eval_shape(network.init, jax.random.PRNGKey(0))
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  template = jax.tree.map(
    lambda x: jax.ShapeDtypeStruct(tuple(x.shape), x.dtype, sharding=device), shapes
  )
  params, meta = ckpt.restore_params(directory, template, step)
  return Agent(
    config=config,
    env=env,
    network=network,
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
  config = model.config
  env = config.make_env()
  meta: Dict[str, object] = ckpt.make_metadata(
    config.to_dict(), model.env_id, model.env_version, model.step
  )
  ckpt.check_compatible(meta, path, env_id=env.id, env_version=env.version)
  network = registry.get(config.agent).model(config, env)
  params = export.fit_params(model, jax.eval_shape(network.init, jax.random.PRNGKey(0)))
  return Agent(
    config=config,
    env=env,
    network=network,
    params=params,
    step=model.step,
    meta=meta,
    directory=path,
    agent_kind=model.agent_kind,
  )
