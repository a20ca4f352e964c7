"""The agent registry (anakin_mz/runtime/registry.py): every agent registers
its learner, model, players and capabilities; the config, the run loop and
restoring read it; restoring builds no learner; the package's public surface."""

import jax
import pytest
import tiny

import anakin_mz
import envs
from anakin_mz.runtime import registry
from anakin_mz.runtime import restore
from anakin_mz.runtime import run
from anakin_mz.runtime.learner import BaseLearner

AGENTS = ("ndmz", "alphazero", "tdlambda", "stochastic_muzero", "ppo")


def test_the_agents_register_in_order():
  assert registry.names() == AGENTS
  for name in AGENTS:
    agent = registry.get(name)
    assert agent.name == name and issubclass(agent.learner, BaseLearner)
  with pytest.raises(ValueError, match="unknown agent 'muzero'; valid agents: ndmz, alphazero"):
    registry.get("muzero")
  with pytest.raises(ValueError, match="already registered"):
    registry.register(registry.get("ndmz"))


def test_capabilities_decide_which_games_an_agent_plays():
  assert registry.supported(envs.make("nannon")) == AGENTS[:4]
  assert registry.supported(envs.make("catch")) == AGENTS
  assert registry.get("ndmz").capabilities.dynamics_tests
  assert [n for n in AGENTS if registry.get(n).capabilities.tree] == ["ndmz", "alphazero"]


@pytest.mark.parametrize("agent", AGENTS[:4])
def test_restoring_builds_no_learner(agent, tmp_path, monkeypatch):
  config = tiny.tiny_config("nannon", f"agent={agent}", "train.checkpoint_every=0")
  result = run.train(config, logdir=str(tmp_path), max_updates=1, progress=False)

  def no_learner(*args, **kwargs):
    raise AssertionError("restoring built a learner")

  monkeypatch.setattr(BaseLearner, "__init__", no_learner)
  loaded = restore.load_agent(result.checkpoint_dir, expect_env="nannon")
  for a, b in zip(jax.tree.leaves(loaded.params), jax.tree.leaves(result.state.params)):
    assert (jax.device_get(a) == jax.device_get(b)).all()
  assert loaded.spec is registry.get(agent)
  state = jax.vmap(loaded.env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
  state = jax.vmap(loaded.env.step)(state, jax.numpy.zeros((2,), jax.numpy.int32))
  for policy in (loaded.greedy_policy(), loaded.search_policy(), loaded.value_policy()):
    assert policy(state, jax.random.PRNGKey(1)).shape == (2,)


def test_the_public_surface():
  assert "__version__" in anakin_mz.__all__
  for name in anakin_mz.__all__:
    assert getattr(anakin_mz, name) is not None
  assert anakin_mz.make_learner is registry.make_learner
  with pytest.raises(AttributeError):
    getattr(anakin_mz, "no_such_name")

