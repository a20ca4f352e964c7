"""A spec's `schedule:` (anakin_mz.experiments.schedule): a bad schedule is a
clear error naming what is valid; a scheduled spec runs through `anakin-mz
experiment run` into the spec driver's layout (one records file, a record
per scored point, the `experiment run` command), resumes, and trains only
the variants asked; `anakin-mz compare` builds the same runs it always
named (its old run directories resume). The fast tests fake the training
and the scoring; the slow one trains and scores a tiny Catch for real."""

from __future__ import annotations

import argparse
import json
import os
import types

import pytest
import tiny

from anakin_mz.cli import compare as compare_cli
from anakin_mz.cli import experiment as cli
from anakin_mz.experiments import compare, records, schedule, schedule_run, spec as spec_lib

TINY = list(tiny.TINY) + [tiny.FIXED_SPAN, "train.checkpoint_every=0"]


def _spec(tmp_path, schedule_text: str, extra: str = "", name: str = "tinysched") -> str:
  overrides = ", ".join(f'"{o}"' for o in TINY)
  path = tmp_path / f"{name}.yaml"
  path.write_text(
    f"name: {name}\nenv: catch\nconfig: catch\noverrides: [{overrides}]\nseeds: [3]\n"
    f"schedule: {schedule_text}\n{extra}"
    "variants:\n  base: []\n  sims2: [agent=ndmz, search.num_simulations=2]\n",
    encoding="utf-8",
  )
  return str(path)


@pytest.mark.parametrize(
  "schedule_text, extra, message",
  [
    ("{rounds: 3, every: 1}", "", r"unknown key\(s\) \['rounds'\]; valid: env_steps, minutes, "
     "games, every, first, score, opponents, exact"),
    ("{every: 10}", "", "needs one budget, env_steps, minutes or games"),
    ("{games: 10, minutes: 5, every: 5}", "", r"needs one budget.*got \['minutes', 'games'\]"),
    ("{games: 600}", "", "needs every: score every this many games"),
    ("{games: 600, every: 900}", "", r"interval must be in \(0, budget=600"),
    ("{games: 600, every: x}", "", "every must be a number"),
    ("{games: 600, every: 300, score: exact}", "", "score must be one of run, paper"),
    ("{games: 600, every: 300, exact: [value]}", "", "exact is the paper scoring's"),
    ("{games: 600, every: 300, score: paper, exact: [policy]}", "",
     r"exact \['policy'\] unknown; valid: greedy, search, value"),
    ("{games: 600, every: 300, score: paper, opponents: []}", "", "at least one bot"),
    ("[600, 300]", "", "schedule must be a mapping of env_steps"),
    ("{games: 600, every: 300}", "budget: {updates: 8}\n", "budget is its schedule: no budget"),
    ("{games: 600, every: 300}", "target: {value: 1, source: x}\nevaluation: {measure: score}\n",
     "no checkpoint, target"),
    ("{games: 600, every: 300}", "evaluation: {games: 4, seed: 5}\n",
     r"evaluation takes games \(match games per score\), got \['seed'\]"),
    ("{games: 600, every: 300}", "evaluation: {games: 3}\n", "even number >= 2, got 3"),
  ],
)  # fmt: skip
def test_a_bad_schedule_is_a_clear_error_naming_what_is_valid(
  tmp_path, schedule_text, extra, message
):
  with pytest.raises(ValueError, match=message):
    spec_lib.load(_spec(tmp_path, schedule_text, extra))


def test_a_schedule_reads_its_budget_and_scoring(tmp_path):
  s = spec_lib.load(_spec(tmp_path, "{games: 3000, every: 600, first: 1200, score: paper}"))
  assert s.schedule.budget == schedule.Budget("games", 3000.0, 600.0, 1200.0)
  assert s.schedule.budget.points() == [1800, 2400, 3000]
  assert (s.schedule.score, s.schedule.opponents) == ("paper", ("optimal", "random"))
  assert s.schedule.exact == ("greedy", "search", "value")
  assert spec_lib.load(_spec(tmp_path, "{env_steps: 1e3, every: 500}")).schedule.score == "run"


def _fake_engine(monkeypatch, trained):
  """`run.train` that makes 16 updates of 4 games per chunk, and a score that
  is the update step over 100: the engine's bookkeeping without JAX."""
  import jax.numpy as jnp

  from anakin_mz.runtime import run as run_lib

  def train(config, logdir, resume, max_updates, max_minutes, progress, stop, evaluate):
    trained.append(os.path.basename(logdir))
    os.makedirs(os.path.join(logdir, "checkpoints"), exist_ok=True)
    start = compare.read_rows(logdir)[-1]["update_step"] if compare.read_rows(logdir) else 0
    step = min(max_updates, start + 16)
    rows = [{"env_steps": 4.0 * (step), "transitions": 4.0 * (step - start), "episodes": 4.0,
             "wall_s": 0.5}] if step > start else []  # fmt: skip
    for row in rows:
      stop(row)
    state = types.SimpleNamespace(update_step=jnp.array(step), env_steps=jnp.array(4.0 * step))
    return types.SimpleNamespace(state=state, history=rows, stopped_by=None)

  monkeypatch.setattr(run_lib, "train", train)
  monkeypatch.setattr(
    compare, "score_checkpoint", lambda run_dir, games, key: {"eval/x_win_rate": 0.5}
  )
  monkeypatch.setattr(compare, "write_report", lambda out, rows, *a: [os.path.join(out, "r")])


def test_a_scheduled_spec_runs_through_experiment_run_into_the_drivers_layout(
  tmp_path, monkeypatch, capsys
):
  trained = []
  _fake_engine(monkeypatch, trained)
  path = _spec(tmp_path, "{env_steps: 128, every: 64}")
  runs = str(tmp_path / "runs")
  argv = ["run", path, "--runs", runs, "--devices", "1"]
  assert cli.main(argv + ["--dry-run"]) == 0
  out = capsys.readouterr().out
  assert "schedule: 128 env_steps, scored every 64 from the start, scoring run" in out
  assert os.path.join(runs, "tinysched", "base_s3") in out and not os.path.exists(runs)
  # One variant asked: only it trains (the untrained point, 64 and 128 env steps).
  assert cli.main(argv + ["--variants", "base", "--no-progress"]) == 0
  assert "3 new record(s) of 1 run(s)" in capsys.readouterr().out
  assert trained == ["base_s3"] * 3
  where = os.path.join(runs, "tinysched")
  recs = records.read(os.path.join(where, "records.jsonl"))  # the spec driver's records file
  assert [(r.experiment, r.variant, r.seed) for r in recs] == [("tinysched", "base", 3)] * 3
  assert [r.budget.env_steps for r in recs] == [0.0, 64.0, 128.0]
  assert recs[-1].figures["eval/x_win_rate"].value == 0.5
  assert recs[0].command == (
    f"anakin-mz experiment run {path} --runs={runs} --variants=base --seeds 3"
  )
  assert recs[0].evaluation == {"games": 500, "agent": "ndmz", "games_played": 0.0}
  # The comparison's settings list every run of the spec; a variant whose
  # first override is its agent is compare's run of that agent.
  with open(os.path.join(where, compare.SPEC_FILE), encoding="utf-8") as f:
    assert json.load(f)["runs"] == [
      {"agent": "ndmz", "seed": 3, "overrides": [], "name": "base"},
      {"agent": "ndmz", "seed": 3, "overrides": ["search.num_simulations=2"], "name": "sims2"},
    ]
  # Again: resumed, nothing to do; then the other variant.
  assert cli.main(argv + ["--variants", "base"]) == 0 and len(trained) == 3
  assert cli.main(argv) == 0 and trained[3:] == ["sims2_s3"] * 3
  assert len(records.read(os.path.join(where, "records.jsonl"))) == 6
  # What a schedule does not do.
  assert cli.main(argv + ["--reevaluate"]) == 2
  assert "has a schedule: its points are not evaluated again" in capsys.readouterr().err


def test_compare_is_the_spec_with_a_schedule_and_names_the_runs_it_always_named(tmp_path):
  """`anakin-mz compare`'s spec: a variant per --agents entry whose runs are
  compare's own (the same labels and `compare.json` entries, so a comparison
  started before resumes), run under --out's parent by its last name."""
  args = argparse.Namespace(
    agents="ndmz,alphazero:search.tree=ndmz:network.noop_action=false",
    out=str(tmp_path / "paper" / "p636_az_s0") + "/",
    env="nannon",
    config="paper/nannon_636_ndmz",
    overrides=["train.batch_size=8"],
    eval_games=1000,
    score="paper",
    score_opponents="optimal,random",
    exact="greedy,value",
  )
  s = compare_cli._spec(args, [0, 1], schedule.Budget("games", 30000, 1500))
  assert s.name == "p636_az_s0" and s.path == "" and s.evaluation == {"games": 1000}
  assert s.schedule == schedule.Schedule(
    schedule.Budget("games", 30000, 1500), "paper", ("optimal", "random"), ("greedy", "value")
  )
  assert [v.name for v in s.variants] == [
    "ndmz",
    "alphazero_search.tree-ndmz_network.noop-action-false",
  ]
  want = compare.parse_runs(args.agents, [0, 1])
  assert schedule_run.run_specs(s) == want
  assert json.loads(json.dumps(want[2].entry())) == {  # as compare.json has always listed it
    "agent": "alphazero", "seed": 0, "overrides": ["search.tree=ndmz", "network.noop_action=false"]
  }  # fmt: skip
  args.exact = "greedy,policy"
  with pytest.raises(ValueError, match=r"\['policy'\] unknown"):
    compare_cli._spec(args, [0], schedule.Budget("games", 600, 300))


@pytest.mark.slow  # a tiny Catch trained to two scored points and scored for real
def test_a_tiny_scheduled_spec_trains_and_scores_through_experiment_run(tmp_path, capsys):
  path = _spec(tmp_path, "{env_steps: 64, every: 64}", "evaluation: {games: 4}\n")
  runs = str(tmp_path / "runs")
  argv = ["run", path, "--runs", runs, "--variants", "base", "--devices", "1"]
  assert cli.main(argv) == 0
  assert "2 new record(s) of 1 run(s)" in capsys.readouterr().out
  where = os.path.join(runs, "tinysched")
  recs = records.read(os.path.join(where, "records.jsonl"))
  rows = compare.read_rows(os.path.join(where, "base_s3"))
  assert [r.budget.updates for r in recs] == [row["update_step"] for row in rows]
  assert rows[0]["update_step"] == 0 and rows[-1]["env_steps"] >= 64
  assert 0.0 <= recs[-1].figures["eval/vs_random_win_rate"].value <= 1.0
  assert os.path.exists(os.path.join(where, "compare.md"))
  assert cli.main(argv) == 0 and "0 new record(s)" in capsys.readouterr().out
