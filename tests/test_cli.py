"""The `anakin-mz` command (anakin_mz/cli): one subcommand per tool, each
tool's help under its subcommand's name, scripts/ as wrappers of the same
modules, and the number spellings of --updates and --minutes."""

import argparse
import glob
import importlib
import os
import re

import pytest

from anakin_mz import cli
from anakin_mz.cli import options

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_help_lists_every_tool_with_its_summary(capsys):
  assert cli.main(["--help"]) == 0
  out = capsys.readouterr().out
  for tool in cli.TOOLS:
    assert re.search(rf"^  {tool} +\S", out, flags=re.M), (tool, out)
  assert "Train NDMZ on a registered game." in out


def test_no_tool_or_an_unknown_one_is_an_error(capsys):
  assert cli.main([]) == 2
  assert "usage: anakin-mz TOOL" in capsys.readouterr().err
  assert cli.main(["trian", "--env=catch"]) == 2
  err = capsys.readouterr().err
  assert "error: unknown tool 'trian'; tools: train, evaluate, play, show-search" in err


def test_the_removed_ppo_tool_names_train_agent_ppo(capsys):
  # PPO has one path: `train --agent=ppo` and the config library.
  assert cli.main(["ppo", "--env", "catch", "num_envs=16"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: `anakin-mz ppo` is gone"), err
  assert "`anakin-mz train --agent=ppo`" in err and "--config ppo/minatar-breakout" in err
  assert "ppo" not in cli.TOOLS


def test_the_removed_strength_tool_names_the_bar_specs(capsys):
  # One experiment driver: the bars are specs with a target.
  assert cli.main(["strength", "--bars", "catch"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: `anakin-mz strength` is gone"), err
  assert "anakin-mz experiment run docs/results/experiments/strength_<game>.yaml" in err
  assert "strength" not in cli.TOOLS


@pytest.mark.parametrize("tool", ["evaluate", "play", "export"])
@pytest.mark.parametrize("spelling", [["--agent", "greedy"], ["--agent=value"], ["--agent"]])
def test_the_players_old_agent_option_is_refused_naming_player(tool, spelling, capsys):
  # `--agent` names the learner (`train`); who plays is `--player`.
  module = importlib.import_module(f"anakin_mz.cli.{cli.TOOLS[tool]}")
  with pytest.raises(SystemExit) as e:
    module.main([*spelling, "--checkpoint", "nannon"], prog=f"anakin-mz {tool}")
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith("error: --agent is now --player ("), err
  with pytest.raises(SystemExit):
    module.main(["--help"], prog=f"anakin-mz {tool}")
  usage = capsys.readouterr().out
  assert "--player" in usage and "--agent" not in usage


@pytest.mark.parametrize("tool", sorted(cli.TOOLS))
def test_each_tool_answers_help_under_its_subcommand(tool, capsys):
  module = importlib.import_module(f"anakin_mz.cli.{cli.TOOLS[tool]}")
  with pytest.raises(SystemExit) as e:
    module.main(["--help"], prog=f"anakin-mz {tool}")
  assert e.value.code == 0
  assert capsys.readouterr().out.startswith(f"usage: anakin-mz {tool} ")


def test_scripts_wrap_exactly_the_tools():
  wrapped = {}
  for path in glob.glob(os.path.join(ROOT, "scripts", "*.py")):
    name = os.path.basename(path)[: -len(".py")]
    with open(path, encoding="utf-8") as f:
      text = f.read()
    if name.startswith("benchmark_"):
      assert "sys.path" not in text
      continue
    assert f"from anakin_mz.cli.{name} import main" in text, path
    assert len([line for line in text.splitlines() if line and not line.startswith('"')]) <= 4
    wrapped[name] = True
  assert sorted(wrapped) == sorted(cli.TOOLS.values())


@pytest.mark.parametrize(
  "text,value", [("10000", 10000), ("1e4", 10000), ("1_000", 1000), ("2.0", 2), ("1E+2", 100)]
)
def test_integer_options_take_the_overrides_spellings(text, value):
  got = options.integer(text)
  assert got == value and type(got) is int


@pytest.mark.parametrize(
  "text,value", [(".5", 0.5), ("1e2", 100.0), ("1_000", 1000.0), ("30", 30.0)]
)
def test_real_options_take_the_overrides_spellings(text, value):
  got = options.real(text)
  assert got == value and type(got) is float


@pytest.mark.parametrize("text", ["2.5", "ten", "1e400", ""])
def test_integer_options_refuse_what_is_not_an_integer(text):
  with pytest.raises(argparse.ArgumentTypeError, match="not an integer"):
    options.integer(text)


@pytest.mark.parametrize("text", ["soon", "nan", ".inf", "true"])
def test_real_options_refuse_what_is_not_a_finite_number(text):
  with pytest.raises(argparse.ArgumentTypeError, match="not a finite number"):
    options.real(text)
