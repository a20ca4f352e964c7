"""The agent registry: what each agent hands the runtime and the evaluation.

An agent is one module of `anakin_mz/agents/` that ends with one call,

    registry.register(registry.AgentSpec(name="ndmz", learner=..., model=..., ...))

and one line of `anakin_mz/agents/__init__.py` that imports it. The run
loop (`run`), restoring (`restore`), the config's checks (`config`) and the
evaluation (`anakin_mz.eval`) read the registry and call what the agent
handed in, as `mctx` takes a `recurrent_fn`: its learner class, its model,
its search and its players. Nothing outside the agents' own modules and this
one chooses by an agent's, a network's or a learner's type.

The registry loads none of this package's modules: an agent is registered
when its module is imported, and whoever runs agents imports them (the
command line, `anakin_mz`'s public names and the experiments import
`anakin_mz.agents`, which registers every built-in agent in order). The
first time it is read, the registry adds the agents of other installed
packages, named by their `anakin_mz.agents` entry points (`envs.plugins`;
docs/extending.md). A name it does not hold is an error that lists the
names it does, and says so where no agent is registered at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, Optional, Tuple

import chex

import envs
from envs import plugins
from anakin_mz.core import act, lookahead
from anakin_mz.core.search import SearchConfig
from anakin_mz.core.types import Model, Params

_REGISTRY: Dict[str, "AgentSpec"] = {}

ValueFn = Callable[[chex.Array], chex.Array]  # `[M, *obs]` observations -> `[M]` values


@dataclasses.dataclass(frozen=True)
class Capabilities:
  """What an agent is and which games it can play.

  Attributes:
    learned_model: it plans with a model of the game that it learns.
    ndmz_network: its model is an NDMZ network (`networks.Network`: h, g and
      f), whose representation the hidden-state map (`eval.hidden_map`)
      reads.
    dynamics_tests: its model has NDMZ's identity and chance heads, which
      the dynamics tests (`eval.dynamics`) test during training and in
      `evaluate.py --diagnostics`.
    tree: its search grows the NDMZ tree (`search.ndmz_search`), which
      `show_search` draws.
    true_model: it plans or looks ahead with the real game (`env.step`). Where
      the game draws chance inside its keyed step (`env.hidden_chance`:
      gymnax, pgx's backgammon and 2048), `env.step(state, action)` replays
      the draw carried in the state, a future no player can know: refused
      there.
    two_sided_value: it follows one value with a sign per side, which a
      zero-sum game of more than two players lacks: refused there.
    single_player: it plays single-player games only.
    seed_axis: its learner's state and step take a leading seed axis
      (`jax.vmap`: a pure step, no host callback), so a study of several
      seeds (`train.seeds`) trains as one program (`runtime.seeds`).
  """

  learned_model: bool = False
  ndmz_network: bool = False
  dynamics_tests: bool = False
  tree: bool = False
  true_model: bool = False
  two_sided_value: bool = False
  single_player: bool = False
  seed_axis: bool = True

  def supports(self, env: envs.Env) -> bool:
    """Whether an agent with these capabilities can play `env`."""
    if self.true_model and env.hidden_chance:
      return False
    if self.two_sided_value and env.payoff == "zero_sum" and env.num_players > 2:
      return False
    return not (self.single_player and env.num_players != 1)


# The lookahead of `lookahead.expectimax_policy` steps the real game and
# flips the value's sign per side, as TD(lambda) does.
LOOKAHEAD = Capabilities(true_model=True, two_sided_value=True)


@dataclasses.dataclass(frozen=True)
class AgentSpec:
  """One agent, as it registers (the module docstring).

  Attributes:
    name: the config's `agent:` value.
    learner: its learner class, `learner(config, mesh)`
      (`learner.BaseLearner`).
    model: `model(config, env)`, its model: its network and, for the agents
      that plan with the real game, the game. What acting and restoring
      need; it builds no learner.
    greedy: `greedy(model, params)`, its network's greedy choice as an
      `envs.Policy` (`evaluate.py --player greedy`).
    value: `value(model, params)`, its value function (`ValueFn`, each
      value from its observation's mover's view), which `value_policy`
      looks ahead one ply with (`evaluate.py --player value`).
    search: its search, an `act.SearchFn`, which self-play runs and
      `player` (by default) plays greedily; None: it does not search.
    player: `player(model, params, env, search_config)`, its greedy player
      as an `envs.Policy` (`evaluate.py --player search`, the run loop's
      evaluation, opponents); None: the greedy search on `search`
      (`act.search_player`), or `greedy` where it has no search.
    plays: how `player` plays where it grows no tree, for the reports, with
      `{depth}` standing for `search.expectimax_depth` ("{depth}-ply
      expectimax"); "" for a tree search of `search.num_simulations`.
    capabilities: `Capabilities`.
    section: the dataclass of its own config section (`<name>:` in a config
      file; `Config.agent_config`), or None.
    check: `check(config)` raises a ValueError for what the agent does not
      implement in an otherwise valid config, or None.
  """

  name: str
  learner: Callable[..., Any]
  model: Callable[[Any, envs.Env], Model]
  greedy: Callable[[Model, Params], envs.Policy]
  value: Callable[[Model, Params], ValueFn]
  search: Optional[act.SearchFn] = None
  player: Optional[Callable[[Model, Params, envs.Env, SearchConfig], envs.Policy]] = None
  plays: str = ""
  capabilities: Capabilities = Capabilities()
  section: Optional[type] = None
  check: Optional[Callable[[Any], None]] = None

  def search_policy(
    self, model: Model, params: Params, env: envs.Env, config: SearchConfig
  ) -> envs.Policy:
    """Its greedy player (`player`) with search settings `config`."""
    if self.player is not None:
      return self.player(model, params, env, config)
    if self.search is None:
      return self.greedy(model, params)
    return act.search_player(self.search, model, params, env, config)

  def value_policy(
    self, model: Model, params: Params, env: envs.Env, *, discount: float, depth: int = 1
  ) -> envs.OnePlyPolicy:
    """Its value function in an expectimax of `depth` moves on the real game
    (`lookahead.expectimax_policy`, as TD(lambda) plays; 1: TD-Gammon's
    1-ply): a diagnostic that judges the value alone, with neither a policy
    nor a learned model.

    Raises ValueError where the real game allows no such lookahead
    (`LOOKAHEAD`).
    """
    if not LOOKAHEAD.supports(env):
      raise ValueError(
        f"--player value plays TD(lambda)'s expectimax on the real game, which "
        f"{env.id} does not allow ({unsupported_reason(env)}); use --player "
        "search or greedy"
      )
    return lookahead.expectimax_policy(
      env, self.value(model, params), discount=discount, depth=depth
    )


def register(agent: AgentSpec) -> AgentSpec:
  """Adds `agent` to the registry (its module calls this once)."""
  if agent.name in _REGISTRY:
    raise ValueError(f"agent {agent.name!r} is already registered")
  _REGISTRY[agent.name] = agent
  return agent


def _add_plugin(name: str, obj: object) -> None:
  """Registers the `AgentSpec` entry point `name` loads (`envs.plugins`);
  one its module registered already stands."""
  if not isinstance(obj, AgentSpec):
    raise ValueError(f"names {obj!r}, which is not an anakin_mz.core.registry.AgentSpec")
  if obj.name != name:
    raise ValueError(f"the entry point's name must be the agent's: its AgentSpec is {obj.name!r}")
  if _REGISTRY.get(name) is not obj:
    register(obj)


_PLUGINS = plugins.Plugins(plugins.AGENTS, _add_plugin)


def _load() -> Dict[str, AgentSpec]:
  _PLUGINS.load()
  return _REGISTRY


def names() -> Tuple[str, ...]:
  """The registered agents, in registration order (ndmz first, the default)."""
  return tuple(_load())


def get(name: str) -> AgentSpec:
  """The registered agent `name`.

  Raises:
    ValueError: an unknown name, listing the valid ones.
  """
  agents = _load()
  if not isinstance(name, str) or name not in agents:
    if not agents:
      raise ValueError(
        f"unknown agent {name!r}: no agent is registered (import anakin_mz.agents, "
        "as the command line does, to register the built-in ones)"
      )
    raise ValueError(f"unknown agent {name!r}; valid agents: {', '.join(agents)}")
  return agents[name]


def supported(env: envs.Env) -> Tuple[str, ...]:
  """The agents that can play `env`, in registration order."""
  return tuple(name for name, agent in _load().items() if agent.capabilities.supports(env))


def unsupported_reason(env: envs.Env) -> str:
  """Why some agents cannot play `env` (for the error message)."""
  if env.hidden_chance:
    return "it draws chance inside its keyed step, hidden from a model"
  return f"{env.num_players} players, {env.payoff}"


def make_learner(config, mesh=None):
  """The learner of `config.agent` (validated by the config) on `mesh`
  (default: every device)."""
  return get(config.agent).learner(config, mesh)
