"""What the tools' command lines share: the parser, numbers in the
overrides' spellings, the help of --config, and the refusal of a renamed
option, and XLA's persistent cache for the tools that compile again."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Optional, Sequence

import envs

CONFIG_HELP = (
  "a YAML file, or the name of a shipped config (e.g. nannon_12_5_6); "
  "default: the env's own (anakin_mz/configs/<env>.yaml, else the generic one of its kind)"
)


def parser(doc: str, prog: Optional[str]) -> argparse.ArgumentParser:
  """A tool's parser: its module docstring `doc` is the help (the first line
  the description, the whole, with its examples, the epilog); `prog` the
  name it runs under (`anakin-mz TOOL`; None: the script's)."""
  return argparse.ArgumentParser(
    prog=prog,
    description=doc.split("\n")[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog=doc,
  )


def env_name(text: str) -> str:
  """An argparse type for `--env`: a registered game's name; any other is
  refused by argparse (exit 2, naming the registered envs)."""
  if text not in envs.registered():
    raise argparse.ArgumentTypeError(
      f"unknown env {text!r}; registered envs: {', '.join(envs.registered())}"
    )
  return text


def add_env_config(parser: argparse.ArgumentParser, *, config: bool = True) -> None:
  """The benchmarks' config arguments: `--env` (`env_name`), `--config`
  (unless `config` is False) and the `section.key=value` overrides."""
  parser.add_argument(
    "--env", required=True, type=env_name, help=f"one of {', '.join(envs.registered())}"
  )
  if config:
    parser.add_argument("--config", default=None, help=CONFIG_HELP)
  parser.add_argument("overrides", nargs="*", help="section.key=value overrides")


class Renamed(argparse.Action):
  """An option that was renamed (`--agent` of evaluate, play and export, now
  `--player`): given, it is refused in one line on stderr naming the new
  spelling, exit 2 (as argparse's own errors), and its help is hidden."""

  def __init__(self, option_strings: Sequence[str], dest: str, *, new: str, why: str, **kwargs):
    kwargs.update(nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    super().__init__(option_strings, dest, **kwargs)
    self.new, self.why = new, why

  def __call__(self, parser, namespace, values, option_string=None):
    print(f"error: {option_string} is now {self.new} ({self.why})", file=sys.stderr)
    raise SystemExit(2)


def add_player(parser: argparse.ArgumentParser, choices: Sequence[str], help: str) -> None:
  """`--player` (`choices`: search, greedy, value), and the refusal of its
  old spelling `--agent`, which elsewhere (`train`) names the learner."""
  parser.add_argument("--player", default=None, choices=tuple(choices), help=help)
  parser.add_argument(
    "--agent",
    action=Renamed,
    new="--player",
    why=f"{', '.join(choices)}: who plays; --agent names the learner, in `anakin-mz train`",
  )


def integer(text: str) -> int:
  """An argparse type: an integer in any spelling an override takes
  (`10000`, `1e4`, `10_000`; `config.parse_number`)."""
  from anakin_mz import config as config_lib  # JAX: only once the options parse

  value = config_lib.parse_number(text)
  if isinstance(value, float) and math.isfinite(value) and value.is_integer():
    value = int(value)
  if not isinstance(value, int):
    raise argparse.ArgumentTypeError(f"not an integer: {text!r} (e.g. 10000, 1e4 or 10_000)")
  return value


def real(text: str) -> float:
  """An argparse type: a finite number in any spelling an override takes
  (`30`, `1e2`, `.5`, `1_000`)."""
  from anakin_mz import config as config_lib

  value = config_lib.parse_number(text)
  if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
    raise argparse.ArgumentTypeError(f"not a finite number: {text!r} (e.g. 30, .5 or 1e2)")
  return float(value)


CHECKPOINT_HELP = (
  "a checkpoint directory (<logdir>/checkpoints, or the run's <logdir>), a model file "
  "(anakin-mz export), "
  "or the name of a shipped model (nannon, nannon_12_5_6, einstein, breakthrough, carchess)"
)


def persistent_cache() -> None:
  """XLA's persistent compilation cache (`$ANAKIN_MZ_CACHE/xla`, default
  ~/.cache/anakin_mz/xla): a scheduled experiment compiles the same training
  step and scoring programs again for every chunk and every scored point,
  and the cache turns each repeat into a read."""
  import jax

  cache = os.environ.get("ANAKIN_MZ_CACHE") or os.path.expanduser("~/.cache/anakin_mz")
  jax.config.update("jax_compilation_cache_dir", os.path.join(cache, "xla"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
