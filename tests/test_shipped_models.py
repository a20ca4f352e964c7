"""The shipped models: each other than Nannon 6-3-6 (whose load, settings
and floor tests are in test_export.py) loads by name from the package,
carries the play settings that were scored (docs/results/models.md), and
scores above a floor in a cheap match. The floors sit well above what the
same config with untrained params scores in the same match (measured once,
in each entry's comment), so a broken or swapped model fails. For every
model, Nannon 6-3-6 included, models.md and the README quote one figure,
and the `slow` test replays its models.md evaluation, with no overrides, and
checks that figure."""

import glob
import os

import pytest

from anakin_mz.cli import options
from anakin_mz.eval import report
from anakin_mz.runtime import export
from anakin_mz.runtime import restore

# Matches play real networks, not tiny programs: XLA's default level
# (conftest.py).
pytestmark = pytest.mark.optimized

# Each shipped model (docs/results/models.md): its game, agent, default
# player and playing search settings (what `anakin-mz export` wrote); `cheap`: its
# default player in a few games against a weak opponent (`evaluate` with no
# overrides but --games and --opponent), the floor on the win rate (the
# mean score in Carchess), and what the same config with untrained params
# scored there; `figure`: models.md's evaluation and its figure (slow);
# `readme`: what the README writes just before the figure (default
# "`NAME` ("). `nannon` has only its figure: test_export.py checks the rest.
MODELS = {
  "nannon": {
    # the slow replay ~1 minute (a 16-simulation search for each decision state)
    "figure": {"games": 2, "measure": "exact.search_vs_optimal", "value": 0.4941, "digits": 4},
    "readme": "--checkpoint nannon` (",
  },
  "nannon_12_5_6": {
    "env": "nannon",
    "env_params": {"points": 12, "checkers": 5, "die_sides": 6},
    "agent": "tdlambda",
    "agent_kind": "search",
    "search": {"expectimax_depth": 1},
    "max_bytes": 400_000,
    # ~12 s; 0.93 (exact: 0.9375), untrained 0.49
    "cheap": {"opponent": "random", "games": 100, "floor": 0.75},
    "figure": {"games": 2, "measure": "exact.search_vs_optimal", "value": 0.4542, "digits": 4},
  },
  "einstein": {
    "env": "einstein",
    "env_params": {"placement": "random"},
    "agent": "tdlambda",
    "agent_kind": "search",
    "search": {"expectimax_depth": 2},
    "max_bytes": 400_000,
    # ~18 s; 0.63, untrained 0.18 (against random 0.88 and 0.59)
    "cheap": {"opponent": "expectiminimax:1", "games": 100, "floor": 0.45},
    "figure": {
      "games": 1000,
      "opponent": "expectiminimax:2",
      "measure": "wdl.win.rate",
      "value": 0.608,
      "digits": 3,
    },
  },
  "breakthrough": {
    "env": "breakthrough",
    "env_params": {"rows": 5, "columns": 5},
    "agent": "ndmz",
    "agent_kind": "search",
    "search": {"root": "gumbel", "num_simulations": 16, "max_num_considered_actions": 8},
    "max_bytes": 2_000_000,
    # ~9 s; 1.0, untrained 0.575 (against mcts:20 1.0 and 0.175)
    "cheap": {"opponent": "random", "games": 40, "floor": 0.9},
    "figure": {
      "games": 200,
      "opponent": "mcts:200",
      "measure": "wdl.win.rate",
      "value": 0.985,
      "digits": 3,
    },
  },
  "carchess": {
    "env": "carchess",
    "env_params": {"map": "tutorial"},
    "agent": "ndmz",
    "agent_kind": "value",
    "search": {"expectimax_depth": 2},
    "config": {"discount": 0.9},
    "max_bytes": 4_500_000,
    # ~20 s; mean score 82.23, untrained 67.25 (the two-move expectimax on the
    # rules' rewards alone, with a random value head; a game's standard
    # deviation ~6.0, so each mean is within ~1.5 at 95 %)
    "cheap": {"opponent": None, "games": 64, "floor": 75.0},
    "figure": {"games": 1000, "measure": "score.mean", "value": 81.23, "digits": 2},
  },
}


def test_every_shipped_model_is_a_packaged_file_and_named_in_the_help():
  files = sorted(glob.glob(os.path.join(os.path.dirname(export.shipped_path("x")), "*.msgpack")))
  assert sorted(os.path.basename(f)[: -len(".msgpack")] for f in files) == sorted(export.SHIPPED)
  assert set(MODELS) == set(export.SHIPPED)
  for name in export.SHIPPED:
    assert name in options.CHECKPOINT_HELP
  # all the models together under 20 MB (issue 61)
  assert sum(os.path.getsize(f) for f in files) <= 20_000_000


# The models with settings and a floor to check here (not `nannon`).
CHEAP = sorted(name for name in MODELS if "cheap" in MODELS[name])


@pytest.mark.parametrize("name", CHEAP)
def test_a_shipped_model_loads_by_name_with_its_scored_settings(name):
  want = MODELS[name]
  assert export.resolve(name) == export.shipped_path(name)
  agent = restore.load_agent(name, expect_env=want["env"])
  assert agent.config.agent == want["agent"] and agent.agent_kind == want["agent_kind"]
  assert {k: agent.env.params[k] for k in want["env_params"]} == want["env_params"]
  search = agent.config.playing_search  # the search section with play_search's keys
  assert {k: getattr(search, k) for k in want["search"]} == want["search"]
  for key, value in want.get("config", {}).items():
    assert getattr(agent.config, key) == value, key
  assert os.path.getsize(export.shipped_path(name)) <= want["max_bytes"]


@pytest.mark.parametrize("name", CHEAP)
def test_a_shipped_model_scores_above_its_floor(name):
  check = MODELS[name]["cheap"]
  r = report.evaluate_checkpoint(
    name, games=check["games"], opponent=check["opponent"], extra=False
  )
  got = r["wdl"]["win"]["rate"] if "wdl" in r else r["score"]["mean"]
  assert got >= check["floor"], (name, got, check)


def _quoted(name):
  figure = MODELS[name]["figure"]
  return f"{figure['value']:.{figure['digits']}f}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_models_md_and_the_readme_quote_each_figure(name):
  """The figure the slow test checks is the one models.md (the list row and
  the model's section, in bold) and the README give."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, "docs", "results", "models.md"), encoding="utf-8") as f:
    models_md = f.read()
  with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
    readme = " ".join(f.read().split())
  text = _quoted(name)
  (row,) = [line for line in models_md.splitlines() if line.startswith(f"- `{name}`: ")]
  assert text in row, row
  section = models_md.split(f"## `{name}` (", 1)[1].split("\n## ", 1)[0]
  assert f"**{text}" in section
  quote = readme.split(MODELS[name].get("readme", f"`{name}` ("), 1)[1][:40]
  assert text in quote, quote


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_shipped_model_scores_its_models_md_figure(name):
  """models.md's command, with no overrides, prints models.md's figure (the
  evaluation is deterministic at a fixed seed: 23 s to 6 minutes each on
  one core, the 12-5-6 exact tables the longest)."""
  figure = MODELS[name]["figure"]
  r = report.evaluate_checkpoint(name, games=figure["games"], opponent=figure.get("opponent"))
  got = r
  for key in figure["measure"].split("."):
    got = got[key]
  assert f"{got:.{figure['digits']}f}" == _quoted(name), (name, got)
