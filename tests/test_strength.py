"""The strength table: bar files, reading a figure from an evaluation
result, and one tiny Catch bar trained, evaluated and reused."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest
import tiny

from anakin_mz import config as config_lib
from anakin_mz.experiments import strength

# A fixed temperature span keeps total_updates out of the compiled step.
TINY = tiny.TINY + (tiny.FIXED_SPAN,)


def _write(path, text):
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return str(path)


def test_the_project_bar_file_loads_and_names_shipped_configs():
  bars = strength.load_bars()  # the shipped bar file
  names = [b.name for b in bars]
  assert names[:1] == ["nannon"] and "catch" in names and len(set(names)) == len(names)
  for b in bars:
    assert b.config in config_lib.shipped(), b  # by name: found wherever the package is
    assert b.measure.split(".")[0] in ("wdl", "score", "exact"), b
  # The recorded command names the shipped config as the bar does.
  assert f"--config={bars[0].config} " in strength.train_command(bars[0], 0, "runs/x")


@pytest.mark.parametrize(
  "body, message",
  [
    ("bars: [{name: a, config: c.yaml, minutes: 1, measure: score}]", "missing field"),
    ("bars: [{name: a, config: c.yaml, minutes: 1, measure: score, bar: 1, colour: 2}]", "colour"),
    ("bars: [{name: a, config: c.yaml, minutes: 0, measure: score, bar: 1}]", "minutes"),
    (
      "bars: [{name: a, config: c.yaml, minutes: 1, measure: score, bar: 1},"
      " {name: a, config: c.yaml, minutes: 1, measure: score, bar: 1}]",
      "used twice",
    ),
    ("nothing: 1", "list under 'bars'"),
    (
      "bars: [{name: a, config: c.yaml, minutes: 1, measure: score, bar: 1,"
      " extra_policies: [value]}]",
      r"extra_policies \['value'\] unknown; valid: greedy, search",
    ),
  ],
)
def test_a_bad_bar_file_is_a_clear_error(tmp_path, body, message):
  with pytest.raises(ValueError, match=message):
    strength.load_bars(_write(tmp_path / "bars.yaml", body))


def test_a_bar_extends_a_bar_above_it(tmp_path):
  path = _write(
    tmp_path / "bars.yaml",
    "bars:\n"
    "  - {name: a, config: catch, minutes: 2, measure: score, bar: 1, games: 7,"
    " overrides: [seed=1], extra_policies: [greedy]}\n"
    "  - {name: b, extends: a, overrides: [seed=2], source: 'b row'}\n"
    "  - {name: c, extends: b, minutes: 3}\n",
  )
  a, b, c = strength.load_bars(path)
  assert b == dataclasses.replace(a, name="b", overrides=("seed=2",), source="b row")
  assert c == dataclasses.replace(b, name="c", minutes=3.0)  # a chain
  for body, message in (
    ("bars: [{name: b, extends: a}]", r"extends 'a', which is not the name of a bar above it"),
    (
      "bars: [{name: a, config: c.yaml, minutes: 1, measure: score, bar: 1},"
      " {name: b, extends: nope}]",
      r"extends 'nope'.*bars above: a",
    ),
  ):
    with pytest.raises(ValueError, match=message):
      strength.load_bars(_write(tmp_path / "bad.yaml", body))


def test_missing_bar_file_and_unknown_bar_names():
  with pytest.raises(ValueError, match="cannot read bar file"):
    strength.load_bars("/nonexistent/bars.yaml")
  bars = strength.load_bars()
  with pytest.raises(ValueError, match="unknown bar.*'chess'.*valid: nannon"):
    strength.select(bars, ["chess"])
  assert [b.name for b in strength.select(bars, ["catch", "nannon"])] == ["nannon", "catch"]


def test_read_measure_gives_intervals_for_rates_and_means_and_exact_numbers():
  result = {
    "wdl": {"win": {"rate": 0.6, "low": 0.5, "high": 0.7, "count": 60}},
    "score": {"mean": 0.2, "std": 1.0, "low": 0.1, "high": 0.3},
    "exact": {"greedy_vs_optimal": 0.4875},
  }
  assert strength.read_measure(result, "wdl.win") == (0.6, 0.5, 0.7, False)
  assert strength.read_measure(result, "score") == (0.2, 0.1, 0.3, False)
  assert strength.read_measure(result, "exact.greedy_vs_optimal") == (0.4875,) * 3 + (True,)
  with pytest.raises(ValueError, match=r"no 'points'.*\['win'\]"):
    strength.read_measure(result, "wdl.points")
  with pytest.raises(ValueError, match="neither a rate nor a mean"):
    strength.read_measure(result, "exact")


def test_a_tiny_catch_bar_trains_evaluates_is_reused_and_makes_a_table(tmp_path):
  overrides = ", ".join(f'"{o}"' for o in TINY + ("train.total_updates=8",))
  bars = _write(
    tmp_path / "bars.yaml",
    f"bars:\n  - {{name: tiny, config: {config_lib.shipped_path('catch.yaml')}, "
    f"minutes: 5, measure: score, bar: -1, games: 20, overrides: [{overrides}]}}\n",
  )
  (bar,) = strength.load_bars(bars)
  runs = str(tmp_path / "runs")
  row = strength.run_bar(bar, 3, runs, progress=False, log=lambda _: None)
  record_path = os.path.join(runs, "tiny", "seed3", "strength.json")
  with open(record_path, encoding="utf-8") as f:
    record = json.load(f)
  assert row.updates == record["updates"] == 8
  assert record["evaluation"]["games"] == 20 and record["evaluation"]["seed"] == 3
  assert -1.0 <= row.low <= row.value <= row.high <= 1.0 and not row.exact and row.met
  assert "--seed=3" in row.command and "--minutes=5" in row.command
  # A second call reuses the run: no training, the same figure.
  mtime = os.path.getmtime(record_path)
  again = strength.run_bar(bar, 3, runs, progress=False, log=lambda _: None)
  assert again == row and os.path.getmtime(record_path) == mtime
  table = strength.markdown([row])
  assert "| tiny | 3 | (plays every seat) | `score` |" in table and "| yes |" in table
  # Report only: an unfinished seed trains nothing and is listed as not run.
  assert strength.run_bar(bar, 4, runs, train=False, log=lambda _: None) is None
  assert not os.path.exists(os.path.join(runs, "tiny", "seed4"))
  assert strength.run_bar(bar, 3, runs, train=False, log=lambda _: None) == row
  assert "Not run yet: tiny seed 4." in strength.markdown([row], missing=[(bar, 4)])
  # An interrupted run (checkpoints, no record) is not silently retrained.
  os.remove(record_path)
  with pytest.raises(ValueError, match="unfinished run"):
    strength.run_bar(bar, 3, runs, progress=False, log=lambda _: None)


def test_check_config_loads_every_project_bar_and_names_the_bar_of_a_bad_one(tmp_path):
  for bar in strength.load_bars():
    strength.check_config(bar)
  catch = config_lib.shipped_path("catch.yaml")
  cases = [
    (f"config: {catch}, overrides: [search.num_simulation=8]", "bar 'b'.*num_simulation"),
    (
      f"config: {catch}, overrides: [search.root=gumbel, search.num_simulations=2, "
      "search.max_num_considered_actions=4]",
      "bar 'b'.*max_num_considered_actions",
    ),
    (f"config: {tmp_path / 'none.yaml'}", "bar 'b'.*does not exist"),
    ("config: nosuch", "bar 'b'.*'nosuch' does not exist.*shipped configs: breakthrough"),
  ]
  for fields, message in cases:
    body = f"bars: [{{name: b, {fields}, minutes: 1, measure: score, bar: 1}}]"
    (bar,) = strength.load_bars(_write(tmp_path / "bars.yaml", body))
    with pytest.raises(ValueError, match=message):
      strength.check_config(bar)
  # A relative path is the bar file's neighbour, whatever the working directory.
  shutil.copy(catch, tmp_path / "mine.yaml")
  body = "bars: [{name: b, config: mine.yaml, minutes: 1, measure: score, bar: 1}]"
  (bar,) = strength.load_bars(_write(tmp_path / "bars.yaml", body))
  assert bar.config == str(tmp_path / "mine.yaml")
  strength.check_config(bar)
