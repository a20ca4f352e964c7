"""Nondeterministic MuZero (NDMZ) in pure JAX, built the Anakin way.

The layers (no module outside `agents/` imports an agent: the registry
loads them):

* the model core: `types`, `value_transform`, `networks`, `search/`,
  `replay/`, `loss`, `lookahead`, `act` (how an agent acts), `selfplay`,
  `reanalyse`, `config`;
* `runtime/`: the learner base (`learner`) and the Anakin step (`anakin`),
  the run loop (`run`), the device mesh (`mesh`, `host`, `scaling`),
  checkpoints (`checkpoint`, `restore`), the NaN guard (`guard`), the step's
  metrics and TensorBoard (`metrics`, `summary`), and the agent registry
  (`registry`) that the runtime and the evaluation read;
* `agents/`: one module per agent, each registering itself (see
  docs/adding_an_agent.md);
* `eval/`: matches, opponents, reports, tournaments, the dynamics tests,
  the search tree, play, plots and the hidden-state map;
* `experiments/`: comparisons, the strength bars, profiling;
* `cli/`: the `anakin-mz` command line.

The names below are the public surface; each is imported on first use (the
package itself imports no JAX, so `anakin-mz TOOL --help` stays fast).
"""

import importlib

__version__ = "0.1.0"

# name -> (module, attribute)
_PUBLIC = {
  "Config": ("anakin_mz.config", "Config"),
  "load_config": ("anakin_mz.config", "load"),
  "load_config_for_env": ("anakin_mz.config", "load_for_env"),
  "train": ("anakin_mz.runtime.run", "train"),
  "RunResult": ("anakin_mz.runtime.run", "RunResult"),
  "NonFiniteError": ("anakin_mz.runtime.run", "NonFiniteError"),
  "load_agent": ("anakin_mz.runtime.restore", "load_agent"),
  "Agent": ("anakin_mz.runtime.restore", "Agent"),
  "AgentSpec": ("anakin_mz.runtime.registry", "AgentSpec"),
  "Capabilities": ("anakin_mz.runtime.registry", "Capabilities"),
  "register_agent": ("anakin_mz.runtime.registry", "register"),
  "get_agent": ("anakin_mz.runtime.registry", "get"),
  "agent_names": ("anakin_mz.runtime.registry", "names"),
  "make_learner": ("anakin_mz.runtime.registry", "make_learner"),
  "BaseLearner": ("anakin_mz.runtime.learner", "BaseLearner"),
  "StepMetrics": ("anakin_mz.runtime.metrics", "StepMetrics"),
  "CheckpointError": ("anakin_mz.runtime.checkpoint", "CheckpointError"),
  "evaluate_checkpoint": ("anakin_mz.eval.report", "evaluate_checkpoint"),
  "SearchConfig": ("anakin_mz.search", "SearchConfig"),
  "ndmz_search": ("anakin_mz.search", "ndmz_search"),
  "Network": ("anakin_mz.networks", "Network"),
  "NetworkConfig": ("anakin_mz.networks", "NetworkConfig"),
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str):
  if name not in _PUBLIC:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  module, attribute = _PUBLIC[name]
  value = getattr(importlib.import_module(module), attribute)
  globals()[name] = value
  return value


def __dir__():
  return sorted(list(globals()) + list(_PUBLIC))
