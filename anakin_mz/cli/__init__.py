"""The command line: `anakin-mz TOOL [ARGS]`, one subcommand per tool.

    anakin-mz train --env nannon
    anakin-mz evaluate --checkpoint runs/nannon/checkpoints --opponent optimal
    anakin-mz TOOL --help

Each tool is a module of this package with `main(argv, prog) -> int`: it
parses its arguments, calls the library, prints, and returns the exit code
(2 and one `error:` line on stderr for bad input, never a traceback).
`[project.scripts]` in pyproject.toml installs `anakin-mz` as `main` below.

`scripts/<tool>.py` stay, as three-line wrappers of these modules, so that
the commands the README, the docs and the recorded runs give
(`python scripts/train.py --env=nannon`) keep working in a checkout; the
code lives here, in the package, so that a wheel carries it. The
`scripts/benchmark_*.py` are developer tools for a checkout and stay scripts.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from typing import Dict, Optional, Sequence

# subcommand -> module of this package.
TOOLS: Dict[str, str] = {
  "train": "train",
  "evaluate": "evaluate",
  "play": "play",
  "show-search": "show_search",
  "export": "export",
  "migrate": "migrate",
  "solve-nannon": "solve_nannon",
  "value-error": "value_error",
  "tournament": "tournament",
  "compare": "compare",
  "experiment": "experiment",
  "plot": "plot",
  "carchess-baselines": "carchess_baselines",
}

# Subcommands that are gone -> what replaced them: refused in one line.
REMOVED: Dict[str, str] = {
  "ppo": "PPO trains through `anakin-mz train --agent=ppo` and the config library "
  "(PureJaxRL's MinAtar settings: `anakin-mz train --env minatar-breakout --config "
  "ppo/minatar-breakout`)",
  "strength": "the bars are experiment specs with a target, run by `anakin-mz experiment "
  "run docs/results/experiments/strength_<game>.yaml [--variants BAR] [--seeds S]` "
  "(`--report-only`, `--reevaluate` and `--out` as before; docs/experiments.md)",
}


def summary(tool: str) -> str:
  """The first line of a tool module's docstring, read without importing it
  (most tools import JAX)."""
  spec = importlib.util.find_spec(f"{__name__}.{TOOLS[tool]}")
  with open(spec.origin, encoding="utf-8") as f:
    doc = ast.get_docstring(ast.parse(f.read())) or ""
  return doc.split("\n")[0]


def usage() -> str:
  width = max(map(len, TOOLS))
  rows = "\n".join(f"  {tool:<{width}}  {summary(tool)}" for tool in TOOLS)
  return (
    "usage: anakin-mz TOOL [ARGS ...]\n\n"
    "Nondeterministic MuZero in pure JAX. Tools:\n"
    f"{rows}\n\n"
    "`anakin-mz TOOL --help` describes a tool."
  )


def main(argv: Optional[Sequence[str]] = None) -> int:
  """`anakin-mz TOOL ARGS...`: runs the tool's `main(ARGS)`."""
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ("-h", "--help"):
    print(usage(), file=sys.stdout if argv else sys.stderr)
    return 0 if argv else 2
  tool, rest = argv[0], argv[1:]
  if tool in REMOVED:
    print(f"error: `anakin-mz {tool}` is gone: {REMOVED[tool]}", file=sys.stderr)
    return 2
  if tool not in TOOLS:
    print(f"error: unknown tool {tool!r}; tools: {', '.join(TOOLS)}", file=sys.stderr)
    return 2
  module = importlib.import_module(f"{__name__}.{TOOLS[tool]}")
  from envs.plugins import PluginError

  try:
    return module.main(rest, prog=f"anakin-mz {tool}")
  except PluginError as e:  # another package's game or agent (docs/extending.md)
    print(f"error: {e}", file=sys.stderr)
    return 2
