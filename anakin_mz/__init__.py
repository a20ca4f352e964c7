"""Nondeterministic MuZero (NDMZ) in pure JAX, built the Anakin way.

The layers, top to bottom (each imports only those below it; the
import-linter contracts in pyproject.toml hold it, `lint-imports`):

* `cli/`: the `anakin-mz` command line; it imports the agents, which
  registers them;
* `experiments/`: the experiment driver (specs, with the strength bars as
  their targets), comparisons, profiling;
* `eval/` and `agents/`, side by side, neither importing the other:
  matches, opponents, reports, tournaments, the dynamics tests, the search
  tree, play, plots, the hidden-state map and the run loop's periodic
  evaluation (`eval.periodic`); one module per agent, each registering
  itself, and the replay learner three of them share (`agents.replay_learner`;
  docs/adding_an_agent.md);
* `runtime/`: the learner base (`learner`), the run loop (`run`, its
  evaluation handed in), the device mesh (`mesh`, `host`, `scaling`),
  checkpoints (`checkpoint`, `restore`, `export`), the NaN guard (`guard`),
  the step's metrics and TensorBoard (`metrics`, `summary`): no agent code;
* `config/`: the config's sections, its files (`extends`, overrides) and
  the readers of older saved configs;
* `core/`: what every learned-model agent shares: `types`,
  `value_transform`, `networks`, `search/`, `replay/`, `loss`, `lookahead`,
  `act` (how an agent acts), `selfplay`, `reanalyse`, and the agent registry
  (`registry`), which imports no agent.

`envs` (the games) is a package of its own, below all of them.

The names below are the public surface; each is imported on first use (the
package itself imports no JAX, so `anakin-mz TOOL --help` stays fast), and
the first use imports `anakin_mz.agents`, so that every agent is registered.
`train` is `runtime.run.train` with the periodic evaluation handed in
(`eval.periodic.evaluate`), as `anakin-mz train` runs it.
"""

import importlib

__version__ = "0.1.0"

# name -> (module, attribute)
_PUBLIC = {
  "Config": ("anakin_mz.config", "Config"),
  "load_config": ("anakin_mz.config", "load"),
  "load_config_for_env": ("anakin_mz.config", "load_for_env"),
  "RunResult": ("anakin_mz.runtime.run", "RunResult"),
  "NonFiniteError": ("anakin_mz.runtime.run", "NonFiniteError"),
  "load_agent": ("anakin_mz.runtime.restore", "load_agent"),
  "Agent": ("anakin_mz.runtime.restore", "Agent"),
  "AgentSpec": ("anakin_mz.core.registry", "AgentSpec"),
  "Capabilities": ("anakin_mz.core.registry", "Capabilities"),
  "register_agent": ("anakin_mz.core.registry", "register"),
  "get_agent": ("anakin_mz.core.registry", "get"),
  "agent_names": ("anakin_mz.core.registry", "names"),
  "make_learner": ("anakin_mz.core.registry", "make_learner"),
  "BaseLearner": ("anakin_mz.runtime.learner", "BaseLearner"),
  "StepMetrics": ("anakin_mz.runtime.metrics", "StepMetrics"),
  "CheckpointError": ("anakin_mz.runtime.checkpoint", "CheckpointError"),
  "evaluate_checkpoint": ("anakin_mz.eval.report", "evaluate_checkpoint"),
  "SearchConfig": ("anakin_mz.core.search", "SearchConfig"),
  "ndmz_search": ("anakin_mz.core.search", "ndmz_search"),
  "Network": ("anakin_mz.core.networks", "Network"),
  "NetworkConfig": ("anakin_mz.core.networks", "NetworkConfig"),
}

__all__ = ["__version__", "train", *_PUBLIC]


def train(config, **kwargs):
  """`runtime.run.train(config, **kwargs)` with the run loop's periodic
  evaluation (`eval.periodic.evaluate`) handed in, as `anakin-mz train`
  trains; the same arguments and `RunResult`."""
  importlib.import_module("anakin_mz.agents")
  run = importlib.import_module("anakin_mz.runtime.run")
  periodic = importlib.import_module("anakin_mz.eval.periodic")
  return run.train(config, evaluate=periodic.evaluate, **kwargs)


def __getattr__(name: str):
  if name not in _PUBLIC:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  importlib.import_module("anakin_mz.agents")  # registers every agent
  module, attribute = _PUBLIC[name]
  value = getattr(importlib.import_module(module), attribute)
  globals()[name] = value
  return value


def __dir__():
  return sorted(list(globals()) + list(_PUBLIC))
