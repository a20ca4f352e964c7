"""A run's learning curve as a run record (`experiments.curves`) and its
command (`anakin-mz experiment curve`): exact values on a written curve."""

import json

import pytest

from anakin_mz.cli import experiment as experiment_cli
from anakin_mz.experiments import curves
from anakin_mz.experiments import records as records_lib
from anakin_mz.runtime import summary


def _write_run(logdir, n=100):
  # Update s: env steps 1000 s, wall-clock 6 s (s / 10 minutes), return s.
  w = summary.SummaryWriter(str(logdir))
  for s in range(1, n + 1):
    w.scalars(s, {summary.ENV_STEPS: 1000 * s, summary.WALL: 6 * s, summary.RETURN: s})
  w.close()
  return str(logdir)


def _record(run, **kw):
  args = dict(experiment="e", variant="v", seed=0, command="cmd", device="d", commit="c", date="t")
  args.update(kw)
  return curves.curve_record(run, **args)


def test_point_names():
  assert curves.point_name(1e7) == "10M"
  assert curves.point_name(3e5) == "300k"
  assert curves.point_name(1.5e6) == "1.5M"
  assert curves.point_name(500) == "500"
  assert curves.point_name(30, "wall") == "30min"
  assert curves.figure_name("selfplay/return_p0", 1e7) == "selfplay/return_p0@10M"


def test_the_curve_is_read_as_the_mean_over_the_last_tenth(tmp_path):
  run = _write_run(tmp_path / "run")
  rec = _record(run, at=[5e4, 1e5])
  # [45k, 50k] env steps: updates 45..50, returns 45..50, mean 47.5; [90k, 100k]: 95.
  assert rec.figures["selfplay/return_p0@50k"].value == pytest.approx(47.5)
  assert rec.figures["selfplay/return_p0@100k"].value == pytest.approx(95.0)
  assert rec.budget.updates == 100 and rec.budget.env_steps == 100_000
  assert rec.budget.train_minutes == pytest.approx(10.0)
  assert rec.evaluation == {
    "curve": summary.RETURN,
    "axis": "env_steps",
    "at": [5e4, 1e5],
    "window": 0.1,
  }
  assert rec.source == "run" and rec.command == "cmd"
  # The wall-clock axis in minutes: 5 minutes is updates 45..50.
  wall = _record(run, at=[5], axis="wall", window=0.1)
  assert wall.figures["selfplay/return_p0@5min"].value == pytest.approx(47.5)
  # A wider window: [25k, 50k] is updates 25..50, mean 37.5.
  assert _record(run, at=[5e4], window=0.5).figures["selfplay/return_p0@50k"].value == 37.5


def test_bad_input_names_what_is_wrong(tmp_path):
  run = _write_run(tmp_path / "run")
  with pytest.raises(ValueError, match="ends at 100k env_steps, before 200k"):
    _record(run, at=[2e5])
  with pytest.raises(ValueError, match="no tag 'eval/score'; its tags: selfplay/return_p0"):
    _record(run, at=[1e4], tag="eval/score")
  with pytest.raises(ValueError, match="unknown axis 'updates'; valid: env_steps, wall"):
    _record(run, at=[1e4], axis="updates")
  with pytest.raises(ValueError, match="at least one point"):
    _record(run, at=[])
  with pytest.raises(ValueError, match="finite and > 0"):
    _record(run, at=[0])
  with pytest.raises(ValueError, match=r"window must be in \(0, 1\]"):
    _record(run, at=[1e4], window=0)
  with pytest.raises(ValueError, match="does not exist"):
    _record(str(tmp_path / "nothing"), at=[1e4])
  _write_run(tmp_path / "run" / "inner", n=3)
  with pytest.raises(ValueError, match="holds 2 TensorBoard runs"):
    _record(str(tmp_path / "run"), at=[1e3])


def test_the_command_appends_a_record_and_exits_2_on_errors(tmp_path, capsys):
  run = _write_run(tmp_path / "run")
  out = str(tmp_path / "records.jsonl")
  who = ["curve", run, "--experiment", "minatar_10m", "--variant", "Breakout MuZero"]
  how = ["--seed", "1", "--records", out, "--command", "train it"]
  where = ["--commit", "abc1234", "--device", "cpu: one core"]
  assert experiment_cli.main(who + how + where + ["--at", "5e4", "100_000"]) == 0
  assert "Breakout MuZero seed 1: selfplay/return_p0@50k 47.500" in capsys.readouterr().out
  (rec,) = records_lib.read(out)
  assert (rec.experiment, rec.variant, rec.seed, rec.command) == (
    "minatar_10m",
    "Breakout MuZero",
    1,
    "train it",
  )
  assert (rec.commit, rec.device) == ("abc1234", "cpu: one core")
  assert rec.figures["selfplay/return_p0@100k"].value == 95.0
  assert json.loads(open(out).read())["budget"]["updates"] == 100
  assert experiment_cli.main(who + how + ["--at", "1e6"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "before 1M" in err and len(err.splitlines()) == 1
  assert len(records_lib.read(out)) == 1
