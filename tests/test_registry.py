"""The agent registry (anakin_mz/core/registry.py): every agent registers
its learner, model, players and capabilities; the config, the run loop and
restoring read it; restoring builds no learner; the package's public surface."""

import jax
import pytest
import tiny

import anakin_mz
import envs
from anakin_mz.core import registry
from anakin_mz.runtime import export, restore
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


@pytest.mark.parametrize(
  "agent",
  # ndmz and tdlambda cover both kinds of model (a network, a value model);
  # the other two restore through the same path: -m slow (CI time).
  [a if a in ("ndmz", "tdlambda") else pytest.param(a, marks=pytest.mark.slow) for a in AGENTS[:4]],
)
def test_restoring_builds_no_learner(agent, tmp_path, monkeypatch):
  config = tiny.tiny_config("nannon", f"agent={agent}", "train.checkpoint_every=0")
  result = run.train(config, logdir=str(tmp_path), max_updates=1, progress=False)

  def no_learner(*args, **kwargs):
    raise AssertionError("restoring built a learner")

  monkeypatch.setattr(BaseLearner, "__init__", no_learner)
  loaded = restore.load_agent(result.checkpoint_dir, expect_env="nannon")
  for a, b in zip(jax.tree.leaves(loaded.params), jax.tree.leaves(result.state.params)):
    assert (jax.device_get(a) == jax.device_get(b)).all()
  # A params-only model file (`export`) restores without a learner too.
  path = str(tmp_path / "model.msgpack")
  export.write(path, loaded.config, loaded.params, loaded.step, loaded.env.id, loaded.env.version)
  from_file = restore.load_agent(path, expect_env="nannon")
  assert from_file.spec is loaded.spec and from_file.step == loaded.step
  for a, b in zip(jax.tree.leaves(from_file.params), jax.tree.leaves(loaded.params)):
    assert (jax.device_get(a) == jax.device_get(b)).all()
  assert loaded.spec is registry.get(agent)
  # Jitted: run op by op, the game and the search took 50 s of CI time.
  state = jax.jit(
    lambda k: jax.vmap(loaded.env.step)(
      jax.vmap(loaded.env.init)(jax.random.split(k, 2)), jax.numpy.zeros((2,), jax.numpy.int32)
    )
  )(jax.random.PRNGKey(0))
  for policy in (loaded.greedy_policy(), loaded.search_policy(), loaded.value_policy()):
    assert jax.jit(policy)(state, jax.random.PRNGKey(1)).shape == (2,)


def test_the_public_surface():
  assert "__version__" in anakin_mz.__all__
  for name in anakin_mz.__all__:
    assert getattr(anakin_mz, name) is not None
  assert anakin_mz.make_learner is registry.make_learner
  with pytest.raises(AttributeError):
    getattr(anakin_mz, "no_such_name")


def _agent_types():
  """The names of every registered agent's learner classes and model classes
  (with their bases), built for Catch, which every agent plays."""
  from anakin_mz import config as config_lib

  names = set()
  env = envs.make("catch")
  for name in AGENTS:
    agent = registry.get(name)
    model = agent.model(config_lib.load("catch", [f"agent={name}"]), env)
    for cls in (*agent.learner.__mro__, *type(model).__mro__):
      if cls is not object:
        names.add(cls.__name__)
  return names


def test_no_type_switch_on_agents_outside_the_registry():
  """No `isinstance`/`issubclass` on a learner or a model type in the package
  (`anakin_mz/`, `envs/`), save in the registry: the runtime and the
  evaluation call what each agent handed in."""
  import ast
  import os

  forbidden = _agent_types()
  assert {"BaseLearner", "TDLambdaLearner", "PPOLearner", "Network", "ValueModel"} <= forbidden
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  registry_path = os.path.join(root, "anakin_mz", "core", "registry.py")
  found = []
  for package in ("anakin_mz", "envs"):
    for folder, _, files in os.walk(os.path.join(root, package)):
      for file in files:
        path = os.path.join(folder, file)
        if not file.endswith(".py") or path == registry_path:
          continue
        with open(path) as f:
          tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
          if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
          ):
            continue
          types = {
            n.id if isinstance(n, ast.Name) else n.attr
            for n in ast.walk(node.args[1])
            if isinstance(n, (ast.Name, ast.Attribute))
          }
          if types & forbidden:
            found.append(f"{os.path.relpath(path, root)}:{node.lineno}")
  assert not found, f"type switches on agent types: {found}"


def test_an_unknown_agent_in_a_config_lists_the_valid_ones():
  from anakin_mz import config as config_lib

  with pytest.raises(
    ValueError, match="unknown agent 'muzero'; valid agents: " + ", ".join(AGENTS)
  ):
    config_lib.load("catch", ["agent=muzero"])


def test_the_registry_loads_no_agent():
  """The registry imports no agent (`core/` sits below `agents/`: the
  import-linter contracts in pyproject.toml hold it statically): an agent
  registers when its module is imported, which the command line and the
  package's public names do. Until then a lookup names the cure."""
  import subprocess
  import sys

  code = (
    "from anakin_mz.core import registry\n"
    "assert registry.names() == (), registry.names()\n"
    "try:\n"
    "  registry.get('ndmz')\n"
    "except ValueError as e:\n"
    "  print(e)\n"
    "import anakin_mz\n"
    "print(','.join(anakin_mz.agent_names()))\n"  # the public names import the agents
  )
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
  first, names = out.stdout.strip().splitlines()
  assert first == (
    "unknown agent 'ndmz': no agent is registered (import anakin_mz.agents, as the "
    "command line does, to register the built-in ones)"
  )
  assert names == ",".join(AGENTS)


def test_no_module_of_the_package_is_over_700_lines():
  """Small modules (the layout's rule): every module of `anakin_mz/` and
  `envs/` holds at most 700 lines, so a mixed file gets split along its
  seams."""
  import os

  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  long = {}
  for package in ("anakin_mz", "envs"):
    for folder, _, files in os.walk(os.path.join(root, package)):
      for file in files:
        if file.endswith(".py"):
          path = os.path.join(folder, file)
          with open(path) as f:
            lines = sum(1 for _ in f)
          if lines > 700:
            long[os.path.relpath(path, root)] = lines
  assert not long, f"modules over 700 lines: {long}"


def test_the_top_of_the_package_holds_at_most_six_modules():
  """The layers are folders (`core/`, `config/`, `runtime/`, `agents/`,
  `eval/`, `experiments/`, `cli/`; the import-linter contracts in
  pyproject.toml hold their order): at most 6 modules sit at the top of
  `anakin_mz/`."""
  import os

  root = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "anakin_mz")
  top = sorted(f for f in os.listdir(root) if f.endswith(".py"))
  assert len(top) <= 6, f"modules at the top of anakin_mz/: {top}"
