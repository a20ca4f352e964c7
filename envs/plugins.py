"""Games and agents from other installed packages, through entry points.

A package registers a game or an agent without touching this one by
naming it in its own `pyproject.toml`:

    [project.entry-points."anakin_mz.games"]
    tiny_catch = "my_games.tiny:TinyCatch"        # an `envs.Game` subclass

    [project.entry-points."anakin_mz.agents"]
    my_agent = "my_agents.agent:SPEC"             # a `registry.AgentSpec`

The entry point's name is the registered name: it must equal the game's
`name` (the agent's `name`). Each registry (`envs.registry`,
`anakin_mz.core.registry`) reads its group once, the first time it is
queried (`registered`, `make`, `names`, `get`, ...), so importing a
registry imports no plugin. A plugin that does not import, names no game
(agent), or takes a name already registered stops that query with a
`PluginError` of one line naming the entry point and its distribution.
docs/extending.md has a worked example.
"""

from __future__ import annotations

import importlib.metadata
from typing import Callable, Optional

GAMES = "anakin_mz.games"
AGENTS = "anakin_mz.agents"


class PluginError(ValueError):
  """A plugin that cannot be loaded or registered (one line: the entry
  point, its distribution and what went wrong)."""


def _first_line(error: BaseException) -> str:
  lines = str(error).strip().splitlines()
  return lines[0] if lines else ""


def _origin(entry_point: importlib.metadata.EntryPoint) -> str:
  dist = entry_point.dist
  where = f"distribution {dist.name} {dist.version}" if dist is not None else "no distribution"
  return f"plugin {entry_point.name!r} ({entry_point.group} = {entry_point.value!r}, {where})"


class Plugins:
  """The entry points of one group, loaded once on first use.

  `add(name, obj)` registers the object an entry point named `name` loads
  (raising ValueError for a bad or duplicate one). `load()` is called at
  the top of every query of the registry: the first call loads the group;
  later calls return at once, or raise the first call's error again, so
  that no query sees a registry the broken plugin left half-loaded.
  """

  def __init__(self, group: str, add: Callable[[str, object], None]):
    self.group = group
    self._add = add
    self._started = False
    self._error: Optional[PluginError] = None

  def load(self) -> None:
    """Loads and registers the group's entry points, the first time.

    Raises:
      PluginError: a plugin failed to import or to register.
    """
    if self._started:  # done, or in progress (a plugin querying its registry)
      if self._error is not None:
        raise self._error
      return
    self._started = True
    points = importlib.metadata.entry_points(group=self.group)
    for entry_point in sorted(points, key=lambda e: (e.name, e.value)):
      try:
        obj = entry_point.load()
      except PluginError as e:  # another plugin, which its import loaded
        self._error = e
        raise
      except Exception as e:  # any import-time failure of the user's code
        why = f"{type(e).__name__}: {_first_line(e)}".rstrip(": ")
        self._error = PluginError(f"{_origin(entry_point)} failed to load: {why}")
        raise self._error from None
      try:
        self._add(entry_point.name, obj)
      except ValueError as e:
        self._error = PluginError(f"{_origin(entry_point)}: {_first_line(e)}")
        raise self._error from None
