"""The tiny training config the tests share: every shipped config (anakin_mz/configs/),
shrunk so that a training step compiles and runs in seconds on a CPU;
`run_script`, a tool of scripts/ run as a user runs it; and `cells`, the
cells of a Markdown table as a reader sees them.

Tests import it as `import tiny` (pytest puts tests/ on the path). Tests that
use the same overrides compile the same programs, which the persistent XLA
cache of conftest.py then shares.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from anakin_mz import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY = (
  "network.hidden=[16,16]",
  "network.latent_dim=8",
  "network.kind=mlp",
  "search.num_simulations=3",
  # A Gumbel root's m may not exceed the simulations (breakthrough.yaml has 8).
  "search.max_num_considered_actions=3",
  "train.num_envs=4",
  "train.rollout_length=4",
  "train.replay_capacity=40",
  "train.min_replay=4",
  "train.batch_size=8",
  "train.unroll_steps=2",
  "train.replay_ratio=2.0",
  "train.eval_every=0",
  "train.log_every=1",
  "train.eval_games=4",
  # nannon.yaml's two-move sibling targets compile a lookahead 18x the one
  # move's; test_siblings sets depth 2 where it tests it.
  "loss.sibling_depth=1",
)


# A fixed temperature span (the span is train.total_updates when 0) keeps the
# budget out of the compiled step: Catch's tiny runs of any budget, in any
# module, then share one compilation through the session's XLA cache.
# (Nannon's shipped config fixes its span already.)
FIXED_SPAN = "train.temperature_decay_updates=100"


def config_path(name: str) -> str:
  """The shipped config <name> (anakin_mz/configs/<name>.yaml)."""
  return config_lib.shipped_path(f"{name}.yaml")


def tiny_config(name: str, *extra: str) -> config_lib.Config:
  """The shipped config <name> with the TINY overrides, then `extra`."""
  return config_lib.load(config_path(name), list(TINY) + list(extra))


def cpu_env(**extra: str) -> Dict[str, str]:
  """This process's environment for a subprocess on the CPU (it inherits
  the test session's XLA compile cache, set by conftest), plus `extra`."""
  return dict(os.environ, JAX_PLATFORMS="cpu", **extra)


def run_script(
  name: str,
  *args: str,
  timeout: float = 600,
  env: Optional[Mapping[str, str]] = None,
  cwd: Optional[str] = None,
) -> subprocess.CompletedProcess:
  """Runs `scripts/<name>.py ARGS` as a user would (a fresh process, the
  installed package), from `cwd` (default the checkout's root), its output
  captured as text."""
  return subprocess.run(
    [sys.executable, os.path.join(ROOT, "scripts", f"{name}.py"), *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=ROOT if cwd is None else cwd,
    env=None if env is None else dict(env),
  )


def run_main(main: Callable[[List[str]], int], *args: str) -> int:
  """A tool's `main(ARGS)` in this process (a fresh one costs seconds of
  imports, and traces again a step this process may hold compiled): its
  exit code, the parser's exit (`SystemExit`) included; any other exception
  propagates, as the traceback a user would see. The test reads the output
  with `capsys`. JAX has started here with one CPU device: a command that
  trains needs `--devices=1`. `host.configure` turns off asynchronous
  dispatch for the process; it is restored after."""
  import jax

  dispatch = jax.config.read("jax_cpu_enable_async_dispatch")
  try:
    return main(list(args))
  except SystemExit as e:
    return e.code
  finally:
    jax.config.update("jax_cpu_enable_async_dispatch", dispatch)


def cells(text: Union[str, Sequence[str]]) -> List[Tuple[str, ...]]:
  """Each Markdown table line of `text` (a string, or its lines) as its
  cells, stripped (how wide `tabulate` pads a column is no matter); an
  alignment line as "---" (left) or "---:" (right) per column."""
  lines = text.splitlines() if isinstance(text, str) else text
  out = []
  for line in lines:
    if not line.startswith("|"):
      continue
    row = tuple(c.strip() for c in line.strip()[1:-1].split("|"))
    if all(c and set(c) <= {"-", ":"} for c in row):
      row = tuple("---:" if c.endswith(":") else "---" for c in row)
    out.append(row)
  return out
