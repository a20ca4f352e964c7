"""`anakin-mz experiment run`: a tiny Catch spec trains, evaluates and
records each run, resumes without training again, reports against its
target, evaluates again on request, evaluates a checkpoint with search
overrides, and rejects bad specs clearly."""

from __future__ import annotations

import json
import os
import re

import jax
import numpy as np
import pytest
import tiny

from anakin_mz.cli import experiment as cli
from anakin_mz.experiments import records, spec as spec_lib, target
from anakin_mz.runtime import restore

# A fixed temperature span keeps total_updates out of the compiled step (as
# tests/test_strength.py): with its 20 games, both tests compile the same
# programs, which the persistent XLA cache shares.
TINY = tiny.TINY + (tiny.FIXED_SPAN,)


def _spec(tmp_path, body: str, name: str = "spec.yaml") -> str:
  path = tmp_path / name
  path.write_text(body, encoding="utf-8")
  return str(path)


def _tiny_spec(tmp_path) -> str:
  overrides = ", ".join(f'"{o}"' for o in TINY)
  return _spec(
    tmp_path,
    "name: tiny\nenv: catch\nconfig: catch\n"
    f"overrides: [{overrides}]\n"
    "seeds: [3]\nbudget: {minutes: 5, updates: 8}\n"
    "evaluation: {games: 20, seed: 5, measure: score}\n"
    "target: {value: -1, source: the worst score}\n"
    "variants:\n  base: []\n"
    "  other: {overrides: [search.num_simulations=2], seeds: [4], note: fewer sims}\n",
  )


# The tool runs in this process, where JAX may have started already with one
# CPU device (`host.configure` then takes --devices 1, not another count).


def test_a_tiny_spec_trains_evaluates_records_and_resumes(tmp_path, capsys):
  path = _tiny_spec(tmp_path)
  runs = str(tmp_path / "runs")
  # --dry-run prints each run's two commands and trains nothing.
  assert cli.main(["run", path, "--runs", runs, "--dry-run", "--devices", "1"]) == 0
  out = capsys.readouterr().out
  assert "anakin-mz train --env=catch --config=catch --minutes=5 --seed=3" in out
  assert "--seed=4" in out and "search.num_simulations=2" in out
  assert "anakin-mz evaluate --checkpoint=" in out and "--games=20 --seed=5" in out
  assert not os.path.exists(runs)

  spec = spec_lib.load(path)
  (rec,) = spec_lib.run(spec, runs, variants=["base"], progress=False, log=lambda _: None)
  assert (rec.experiment, rec.variant, rec.seed, rec.source) == ("tiny", "base", 3, "run")
  assert rec.budget.updates == 8 and rec.budget.minutes == 5 and rec.budget.train_minutes > 0
  assert rec.budget.env_steps > 0 and "train.total_updates=8" in rec.overrides
  assert rec.evaluation["games"] == 20 and rec.evaluation["seed"] == 5
  score = rec.figures["score"]
  assert score.low <= score.value <= score.high and rec.evaluation["measure"] == "score"
  assert rec.evaluation["target"] == -1.0 and rec.note == ""
  assert (
    rec.command.startswith("anakin-mz train --env=catch")
    and " && anakin-mz evaluate " in rec.command
  )
  assert rec.device and rec.date
  # The record is the one line of the records file, read back equal.
  recorded = os.path.join(runs, "tiny", "records.jsonl")
  assert records.read(recorded) == [rec]
  logdir = os.path.join(runs, "tiny", "base_s3")
  with open(os.path.join(logdir, "eval.json"), encoding="utf-8") as f:
    assert json.load(f)["games"] == 20

  # Run again: recorded, so skipped (nothing trains, nothing is appended).
  assert spec_lib.run(spec, runs, variants=["base"], progress=False, log=lambda _: None) == []
  assert len(records.read(recorded)) == 1
  # The target's report, from the records alone: the run against the bar,
  # the unrecorded one listed, the bar's source; --out writes it.
  out = str(tmp_path / "report.md")
  argv = ["run", path, "--runs", runs, "--report-only", "--out", out, "--devices", "1"]
  assert cli.main(argv) == 0
  printed = capsys.readouterr().out
  (row,) = [r for r in tiny.cells(printed) if r[0] == "base"]
  assert row[:4] == ("base", "3", "(plays every seat)", "`score`")
  assert row[4] == f"{score.value:.3f}" and row[6:8] == (">= -1", "yes")
  assert "Not run yet: other seed 4." in printed and "- base: the worst score" in printed
  assert f"- base, seed 3: `{rec.command}`" in printed
  with open(out, encoding="utf-8") as f:
    assert f.read() == "# tiny: against the target\n\n" + printed.split(f"wrote {out}")[0][:-1]
  assert len(records.read(recorded)) == 1  # nothing ran
  # Evaluated again on request: the training is kept, the record replaced.
  mtime = os.path.getmtime(os.path.join(logdir, "train.json"))
  (re_,) = spec_lib.run(
    spec, runs, variants=["base"], reevaluate=True, progress=False, log=lambda _: None
  )
  assert records.read(recorded) == [re_] and re_.figures == rec.figures
  assert re_.budget == rec.budget and os.path.getmtime(os.path.join(logdir, "train.json")) == mtime
  # A finished training without its record is evaluated, not trained again.
  os.remove(recorded)
  mtime = os.path.getmtime(os.path.join(logdir, "train.json"))
  (again,) = spec_lib.run(spec, runs, variants=["base"], progress=False, log=lambda _: None)
  assert again.budget == rec.budget and again.figures == rec.figures
  assert os.path.getmtime(os.path.join(logdir, "train.json")) == mtime
  # An interrupted run (checkpoints, no train.json) is not silently retrained.
  os.remove(os.path.join(logdir, "train.json"))
  os.remove(recorded)
  with pytest.raises(ValueError, match="unfinished run"):
    spec_lib.run(spec, runs, variants=["base"], progress=False, log=lambda _: None)

  # A checkpoint spec: nothing trains; each variant evaluates the checkpoint
  # with its search overrides (here the run's own number: the same programs).
  checkpoint = os.path.join(logdir, "checkpoints")
  path2 = _spec(
    tmp_path,
    f"name: search\nenv: catch\ncheckpoint: {checkpoint}\n"
    "evaluation: {games: 20, measure: score}\n"
    "variants:\n  sims3: [search.num_simulations=3]\n",
    "search.yaml",
  )
  (ev,) = spec_lib.run(spec_lib.load(path2), runs, progress=False, log=lambda _: None)
  assert ev.overrides == ("search.num_simulations=3",) and ev.budget.train_minutes is None
  assert "--search=num_simulations=3" in ev.command and "anakin-mz train" not in ev.command
  assert ev.budget.updates == 8 and ev.evaluation["games"] == 20


@pytest.mark.slow  # four tiny trainings and their evaluations: 56 s of CI (cold cache)
def test_a_variants_seeds_train_as_one_program_with_the_figures_of_one_after_another(tmp_path):
  """An updates budget: seeds 3 and 4 trained as one program (`auto`) make
  the records of the two trained one after another (`no`): params to float
  rounding, the same figures, updates and env steps; the record's command
  is the study's `--seeds` and its note says the wall-clock was shared. A
  minutes budget keeps them one after another. (tests/test_seeds.py's
  config: its single runs' and its study's steps, from the XLA cache.)"""
  config = tiny.TINY + ("train.checkpoint_every=0", tiny.FIXED_SPAN, "train.total_updates=4")
  overrides = ", ".join(f'"{o}"' for o in config)
  path = _spec(
    tmp_path,
    f"name: pair\nenv: catch\nconfig: catch\noverrides: [{overrides}]\n"
    "seeds: [3, 4]\nbudget: {updates: 4}\nevaluation: {games: 20, seed: 5, measure: score}\n"
    "variants:\n  base: []\n",
    "pair.yaml",
  )
  spec = spec_lib.load(path)
  lines, got = {}, {}
  for together in ("no", "auto"):
    lines[together] = []
    got[together] = spec_lib.run(
      spec, str(tmp_path / together), progress=False, log=lines[together].append, together=together
    )
  assert "[base] seeds 3 4: one after another (as asked: seeds together no)" in lines["no"]
  (chose,) = [line for line in lines["auto"] if line.startswith("[base] seeds 3 4: ")]
  assert re.fullmatch(
    r"\[base\] seeds 3 4: one program \(est\. [\d.]+ [MG]iB of [\d.]+ [MG]iB free host memory\)",
    chose,
  ), chose
  for a, b in zip(got["no"], got["auto"], strict=True):
    assert a.seed == b.seed and a.figures == b.figures and a.overrides == b.overrides
    assert a.budget.updates == b.budget.updates == 4 and a.budget.env_steps == b.budget.env_steps
    assert a.note == "" and "one program with seeds 3 4" in b.note and b.budget.train_minutes > 0
    # (as the record writes it: relative to the repository root, `records.repo_path`)
    study = records.repo_path(os.path.join(str(tmp_path / "auto"), "pair", "base_seeds_3_4"))
    assert f"--seeds 3 4 --logdir={study} " in b.command
    assert f"--checkpoint={study}/seed{b.seed}/checkpoints " in b.command
    one, other = (restore.load_agent(str(tmp_path / t / "pair" / f"base_s{a.seed}")) for t in got)
    for x, y in zip(jax.tree.leaves(one.params), jax.tree.leaves(other.params), strict=True):
      np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-4, atol=1e-5)
  # Recorded: a rerun skips both. A study cut short: each seed's unfinished
  # run directory is the error it is for one run.
  runs = str(tmp_path / "auto")
  assert spec_lib.run(spec, runs, progress=False, log=lambda _: None) == []
  os.remove(spec_lib.records_path(spec, runs))
  for s in (3, 4):
    os.remove(os.path.join(runs, "pair", f"base_s{s}", "train.json"))
  with pytest.raises(ValueError, match="base_s3' holds an unfinished run"):
    spec_lib.run(spec, runs, progress=False, log=lambda _: None)


def test_the_choice_of_one_program_or_one_after_another(tmp_path):
  """The driver's rule (`spec.choose`; nothing trains): an updates budget
  that fits in memory is one program, a minutes budget one after another
  unless forced, and `no` is one after another."""
  config = tiny.TINY + ("train.checkpoint_every=0",)
  overrides = ", ".join(f'"{o}"' for o in config)
  path = _spec(
    tmp_path,
    f"name: pair\nenv: catch\nconfig: catch\noverrides: [{overrides}]\n"
    "seeds: [3, 4]\nbudget: {updates: 4}\nevaluation: {games: 20}\nvariants:\n  base: []\n",
    "pair.yaml",
  )
  counted = spec_lib.load(path)
  one, why = spec_lib.choose(counted, counted.variants[0], [3, 4])
  assert one and re.fullmatch(r"est\. [\d.]+ [MG]iB of [\d.]+ [MG]iB free host memory", why), why
  assert spec_lib.choose(counted, counted.variants[0], [3, 4], "no") == (
    False,
    "as asked: seeds together no",
  )
  timed = spec_lib.load(_tiny_spec(tmp_path))
  one, why = spec_lib.choose(timed, timed.variants[0], [3, 4])
  assert not one and why.startswith("the 5-minute budget would be split among the seeds")
  one, why = spec_lib.choose(timed, timed.variants[0], [3, 4], "yes")
  assert one and "share the 5-minute budget" in why


@pytest.mark.parametrize(
  "body, message",
  [
    ("name: a\nenv: catch\n", r"missing key\(s\) \['variants'\]"),
    ("name: a\nenv: catch\nvariants: {b: []}\ncolour: 1\n", r"unknown key\(s\) \['colour'\]"),
    ("name: a\nenv: catch\nvariants: {b: [td10]}\n", "KEY=VALUE"),
    ("name: a\nenv: catch\nseeds: [-1]\nvariants: {b: []}\n", "seeds must be"),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {game: 3}\n",
      r"unknown key\(s\) \['game'\]",
    ),
    (
      "name: a\nenv: catch\ncheckpoint: nannon\nvariants: {b: [train.td_steps=3]}\n",
      "override the search only",
    ),
    (  # who plays is `player`, as evaluate's --player; `agent` names the learner
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {agent: greedy}\n",
      "evaluation: agent is now player",
    ),
    (  # the value to reach is the spec's target, once
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {measure: score, target: 1}\n",
      r"evaluation: target is now the spec's own key, target: \{value: V, source: TEXT\}",
    ),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {measure: score}\ntarget: 1\n",
      "target must be a mapping",
    ),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {measure: score}\n"
      "target: {value: high}\n",
      "target: value must be a number",
    ),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {measure: score}\n"
      "target: {value: 1, bar: 2}\n",
      r"target: unknown key\(s\) \['bar'\]; valid: value, source",
    ),
    ("name: a\nenv: catch\nvariants: {b: []}\ntarget: {value: 1}\n", "needs evaluation.measure"),
    (
      "name: a\nenv: catch\nvariants: {b: {overrides: [], about: x}}\n",
      r"unknown key\(s\) \['about'\]; valid: overrides, seeds, note, player",
    ),
    (  # a player evaluate does not know: refused before anything trains
      "name: a\nenv: catch\nvariants: {b: {overrides: [], player: policy}}\n",
      r"variant 'b': player must be one of search, greedy, value, got 'policy'",
    ),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {player: best}\n",
      r"evaluation: player must be one of search, greedy, value, got 'best'",
    ),
    (
      "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {checkpoints: 0}\n",
      r"evaluation checkpoints must be an integer >= 1 \(the newest saved steps",
    ),
    (  # a checkpoint spec names one step
      "name: a\nenv: catch\ncheckpoint: nannon\nvariants: {b: []}\nevaluation: {checkpoints: 2}\n",
      "a checkpoint spec or a schedule evaluates one step",
    ),
  ],
)
def test_a_bad_spec_is_a_clear_error(tmp_path, body, message):
  with pytest.raises(ValueError, match=message):
    spec_lib.load(_spec(tmp_path, body))


def test_the_evaluate_command_of_a_spec_names_its_player(tmp_path):
  path = _spec(tmp_path, "name: a\nenv: catch\nvariants: {b: []}\nevaluation: {player: value}\n")
  spec = spec_lib.load(path)
  command = spec_lib.evaluate_command(spec, spec.variants[0], 0, "CKPT", "OUT")
  assert "--player=value" in command and "--agent" not in command
  # A variant's own player wins over the evaluation's; the others keep it.
  path = _spec(
    tmp_path,
    "name: a\nenv: catch\nvariants:\n  b: []\n  c: {overrides: [], player: greedy}\n"
    "  d: {overrides: [], player: search}\nevaluation: {player: value}\n",
  )
  spec = spec_lib.load(path)
  b, c, d = spec.variants
  assert [v.player for v in (b, c, d)] == [None, "greedy", "search"]
  commands = [spec_lib.evaluate_command(spec, v, 0, "CKPT", "OUT") for v in (b, c, d)]
  assert "--player=value" in commands[0]
  assert "--player=greedy" in commands[1] and "--player=value" not in commands[1]
  assert "--player" not in commands[2]  # search: evaluate's default
  # The newest N checkpoints pooled: evaluate's --last-checkpoints (1: the plain command).
  for n, flag in ((3, " --last-checkpoints=3 "), (1, "")):
    path = _spec(
      tmp_path, f"name: a\nenv: catch\nvariants: {{b: []}}\nevaluation: {{checkpoints: {n}}}\n"
    )
    spec = spec_lib.load(path)
    command = spec_lib.evaluate_command(spec, spec.variants[0], 0, "CKPT", "OUT")
    assert (flag in command) if flag else ("--last-checkpoints" not in command)


def test_bad_overrides_and_variants_fail_before_anything_trains(tmp_path, capsys):
  path = _spec(tmp_path, "name: a\nenv: catch\nvariants: {b: [search.num_simulation=8]}\n")
  runs = str(tmp_path / "runs")
  assert cli.main(["run", path, "--runs", runs, "--devices", "1"]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: variant 'b'") and "num_simulation" in err and "Traceback" not in err
  path = _spec(tmp_path, "name: a\nenv: catch\nvariants: {b: []}\n")
  assert cli.main(["run", path, "--runs", runs, "--variants", "c", "--devices", "1"]) == 2
  assert "unknown variant(s) ['c']; the spec has b" in capsys.readouterr().err
  assert cli.main(["run", str(tmp_path / "none.yaml"), "--devices", "1"]) == 2
  assert "cannot read spec" in capsys.readouterr().err
  assert cli.main(["run", path, "--runs", runs, "--report-only", "--devices", "1"]) == 2
  assert "has no target: --report-only and --out report against a target" in (
    capsys.readouterr().err
  )
  with pytest.raises(SystemExit) as exit_:
    cli.main(["run", path, "--runs", runs, "--seeds-together", "maybe", "--devices", "1"])
  err = capsys.readouterr().err
  assert exit_.value.code == 2 and "--seeds-together: invalid choice: 'maybe'" in err
  with pytest.raises(ValueError, match="seeds together must be one of auto, yes, no, got 'maybe'"):
    spec_lib.run(spec_lib.load(path), runs, together="maybe")
  assert not os.path.exists(runs)


def test_the_shipped_specs_load_and_their_configs_check():
  here = os.path.join(tiny.ROOT, "docs", "results", "experiments")
  names = sorted(os.listdir(here))
  assert "carchess_sweep.yaml" in names and "search_nannon.yaml" in names
  bars = {}
  for name in names:
    spec = spec_lib.load(os.path.join(here, name))
    spec_lib.check(spec)
    # A copy for another model is named after its model label (planning_*_s7);
    # a spec of one of several bars sharing a name, after its first variant.
    model, first = spec.evaluation.get("model"), spec.variants[0].name
    assert name[: -len(".yaml")] in (spec.name, f"{spec.name}_{model}", f"{spec.name}_{first}")
    if spec.name == "strength":
      assert spec.target is not None and spec.minutes is not None, name
      for v in spec.variants:
        assert v.name not in bars, (v.name, name, bars.get(v.name))  # one run directory each
        bars[v.name] = name
  # The bars: one spec per game's bar, its ablations its variants.
  assert {"nannon", "nannon_12_5_6", "carchess", "einstein", "breakthrough", "catch"} <= set(bars)


def test_the_report_reads_the_last_record_of_each_run_and_names_a_missing_figure():
  def rec(variant, seed, value, **figures):
    return records.new(
      "e",
      variant,
      seed,
      command=f"run {variant} {seed} {value}",
      budget=records.Budget(updates=7, train_minutes=1.25),
      evaluation={"opponent": "bot:1"},
      figures={"wdl.win": records.Figure(value, value - 0.1, value + 0.1), **figures},
      device=None,
      commit=None,
      date=None,
    )

  recs = [rec("a", 0, 0.4), rec("a", 0, 0.6), rec("b", 0, 0.5, score=records.Figure(2.0))]
  bar = target.Target(0.55, "a bot")
  rows, missing = target.rows(recs, "e", [("a", 0), ("b", 0), ("a", 1)], "wdl.win", bar)
  assert [(r.variant, r.figure.value, r.met) for r in rows] == [("a", 0.6, True), ("b", 0.5, False)]
  assert missing == [("a", 1)] and target.rows(recs, "x", [("a", 0)], "wdl.win", bar)[0] == []
  cells = tiny.cells(target.markdown(rows, missing=missing, sources={"a": "a bot"}))
  assert cells[-1] == (
    "b",
    "0",
    "bot:1",
    "`wdl.win`",
    "0.500",
    "[0.400, 0.600]",
    ">= 0.55",
    "**no**",
    "7",
    "1.2 min",
  )
  rows, _ = target.rows(recs, "e", [("b", 0)], "score", bar)
  assert tiny.cells(target.markdown(rows))[-1][4:6] == ("2.000", "exact")
  with pytest.raises(
    ValueError, match="the record of a seed 0 has no figure 'score'; it has wdl.win"
  ):
    target.rows(recs, "e", [("a", 0)], "score", bar)
