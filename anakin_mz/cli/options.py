"""What the tools' command lines share: the parser, numbers in the
overrides' spellings, and the help of --config."""

from __future__ import annotations

import argparse
import math
from typing import Optional

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
