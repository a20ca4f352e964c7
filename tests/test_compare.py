"""anakin_mz.experiments.compare: run specs, budgets, the agent override, the tables and
figures from hand-made rows; end to end (slow): two tiny NDMZ runs on Nannon
6-3-6 trained in chunks, scored exactly, resumed."""

import dataclasses
import json
import os
import types

import numpy as np
import pytest
import tiny

from anakin_mz.experiments import compare, compare_report, compare_state
from anakin_mz.experiments import records as records_lib
from anakin_mz import config as config_lib

ROOT = os.path.join(os.path.dirname(__file__), "..")
NANNON = config_lib.shipped_path("nannon.yaml")

TINY = list(tiny.TINY) + ["train.checkpoint_every=0"]  # compare saves after each chunk


def test_parse_runs_labels_and_errors():
  runs = compare.parse_runs("ndmz,ndmz:search.num_simulations=8", [0, 1])
  assert [r.label for r in runs] == [
    "ndmz_s0",
    "ndmz_s1",
    "ndmz_search.num-simulations-8_s0",
    "ndmz_search.num-simulations-8_s1",
  ]
  assert runs[2].overrides == ("search.num_simulations=8",)
  with pytest.raises(ValueError, match="same run twice"):
    compare.parse_runs("ndmz,ndmz", [0])
  with pytest.raises(ValueError, match="KEY=VALUE"):
    compare.parse_runs("ndmz:search", [0])
  with pytest.raises(ValueError, match="not a name"):
    compare.parse_runs("nd-mz", [0])
  with pytest.raises(ValueError, match="comma-separated"):
    compare.parse_runs("ndmz,,tdlambda", [0])


def test_budget_points_and_validation():
  assert compare.Budget("env_steps", 1000, 300).points() == [300, 600, 900, 1000]
  assert compare.Budget("minutes", 10, 5).points() == [5, 10]
  assert compare.Budget("games", 900, 300).points() == [300, 600, 900]  # the paper's rounds
  with pytest.raises(ValueError, match=r"unit must be one of \('env_steps', 'minutes', 'games'\)"):
    compare.Budget("rounds", 10, 5)
  with pytest.raises(ValueError, match="interval"):
    compare.Budget("minutes", 10, 20)
  with pytest.raises(ValueError, match="budget must be"):
    compare.Budget("minutes", 0, 0)
  # A first scored point past the start: the schedule goes on from there.
  assert compare.Budget("games", 3000, 600, first=1200).points() == [1800, 2400, 3000]
  assert compare.Budget("games", 3000, 600, first=1000).points() == [1200, 1800, 2400, 3000]
  assert compare.Budget("games", 3000, 600, first=3000).points() == []
  with pytest.raises(ValueError, match=r"first scored point must be in \[0, budget=3000"):
    compare.Budget("games", 3000, 600, first=3600)


def test_a_first_point_past_the_start_trains_to_it_unscored(monkeypatch):
  """`Budget.first`: no untrained point; the first chunk trains to the first
  point and scores it, then the schedule goes on (games, env steps and
  minutes alike)."""
  monkeypatch.setattr(compare, "write_report", lambda *a, **k: [])
  s = compare.RunSpec("ndmz", 0)
  configs = {s.label: types.SimpleNamespace(train=types.SimpleNamespace(total_updates=10**6))}
  for budget, point_of in (
    (compare.Budget("games", 3000, 600, first=1200), lambda a: a[3]),
    (compare.Budget("env_steps", 3000, 600, first=1200), lambda a: a[1] * 100.0),
    (compare.Budget("minutes", 30, 6, first=12), lambda a: a[2]),
  ):
    rows = {s.label: []}
    calls = []

    def chunk(spec, max_updates, max_minutes, games=None):
      calls.append((spec, max_updates, max_minutes, games))
      done = rows[spec.label][-1]["train_s"] / 60 if rows[spec.label] else 0.0
      point = point_of(calls[-1]) + (done if budget.unit == "minutes" else 0.0)
      rows[spec.label].append({
        "update_step": int(point / 100), "games": point, "env_steps": point,
        "train_s": 60 * point,
      })  # fmt: skip

    monkeypatch.setattr(compare, "env_steps_per_update", lambda config: 100.0)
    compare._schedule([s], rows, budget, configs, chunk, "out", None, "")
    assert [r["games"] for r in rows[s.label]] == [budget.first] + budget.points()
    assert all(c[1] > 0 for c in calls)  # no untrained (0-update) chunk


def test_a_run_scored_short_of_the_first_point_trains_on_to_it(monkeypatch):
  """A run a signal stopped before the first point and `score_now` scored
  where it stopped (2,984 of 12,000 games): the same command trains it on to
  the first point and scores it there (it used to report and stop, since
  the run had a row and the schedule had no point after the first)."""
  monkeypatch.setattr(compare, "write_report", lambda *a, **k: [])
  s = compare.RunSpec("alphazero", 1)
  configs = {s.label: types.SimpleNamespace(train=types.SimpleNamespace(total_updates=10**6))}
  rows = {s.label: [{"update_step": 11520, "games": 2984.0, "env_steps": 3e5, "train_s": 2232.0}]}
  calls = []

  def chunk(spec, max_updates, max_minutes, games=None):
    calls.append(games)
    rows[spec.label].append({"update_step": 46000, "games": games, "env_steps": 1.2e6})

  for total in (12000, 24000):  # the first point is the last, or not
    del rows[s.label][1:], calls[:]
    compare._schedule([s], rows, compare.Budget("games", total, 12000, first=12000), configs,
                      chunk, "out", None, "")  # fmt: skip
    assert calls == [12000, 24000][: total // 12000]
  # Past the first point already: nothing more to train for it.
  del calls[:]
  compare._schedule([s], rows, compare.Budget("games", 12000, 12000, first=12000), configs,
                    chunk, "out", None, "")  # fmt: skip
  assert calls == []


def test_run_config_sets_seed_schedule_and_agent(monkeypatch):
  spec = compare.RunSpec("ndmz", 3, ("search.num_simulations=5",))
  budget = compare.Budget("env_steps", 100_000, 10_000)
  cfg = compare.run_config(NANNON, ["train.batch_size=128"], spec, budget)
  assert cfg.seed == 3 and cfg.search.num_simulations == 5
  assert cfg.train.eval_every == 0  # compare scores, not the training loop
  # 64 lanes x 16 steps per chunk, 4 * 1024 / 128 = 32 updates: 32 env
  # steps per update, so the budget takes 3125 updates.
  assert compare.env_steps_per_update(cfg) == 32.0
  assert cfg.train.total_updates == 3125
  minutes = compare.run_config(NANNON, [], spec, compare.Budget("minutes", 5, 1))
  assert minutes.train.total_updates == config_lib.load(NANNON).train.total_updates
  # Today's config has no `agent` key: only ndmz is valid, and it says so.
  if not compare._knows_agent_key():
    with pytest.raises(ValueError, match="only valid agent is 'ndmz'"):
      compare.run_config(NANNON, [], compare.RunSpec("alphazero", 0), budget)
  # Where the config has the key, the agent goes in as an override.
  seen = []
  real_load = config_lib.load
  monkeypatch.setattr(compare, "_knows_agent_key", lambda: True)
  monkeypatch.setattr(
    compare.config_lib,
    "load",
    lambda path, over=(): (
      seen.append(list(over)) or real_load(path, [o for o in over if "agent=" not in o])
    ),
  )
  compare.run_config(NANNON, [], compare.RunSpec("tdlambda", 0), budget)
  assert "agent=tdlambda" in seen[0]


def rows_for(label, agent, seed, points):
  """Hand-made rows: (update_step, env_steps, train_s, vs_optimal)."""
  return [
    {
      "label": label,
      "agent": agent,
      "seed": seed,
      "update_step": u,
      "env_steps": e,
      "train_s": t,
      "exact/greedy_vs_optimal": v,
      "exact/greedy_vs_random": 0.5 + v / 2,
      "eval/vs_random_win_rate": 0.6,
      "dynamics/top_move_k0": v,
      "dynamics/top_move_k2": v / 2,
      "dynamics/uniform_k0": v,
    }
    for u, e, t, v in points
  ]


def test_markdown_tables_interpolate_at_equal_budget(tmp_path):
  rows = {
    "ndmz_s0": rows_for("ndmz_s0", "ndmz", 0, [(0, 0, 0, 0.2), (10, 1000, 60, 0.4)]),
    "alphazero_s0": rows_for(
      "alphazero_s0", "alphazero", 0, [(0, 0, 0, 0.3), (5, 500, 120, 0.4), (10, 2000, 240, 0.5)]
    ),
  }
  text = compare.markdown(rows, compare.Budget("env_steps", 2000, 1000), "t")
  lines = text.splitlines()
  row = ("ndmz_s0", "ndmz", "0", "10", "1000", "1.0", "0.4000", "0.7000", "0.6000")
  assert row in tiny.cells(lines)
  # Equal env steps: a grid up to 1000 (the shorter run); at 400 ndmz is
  # 0.2 + 0.4 * 0.2 = 0.28 and alphazero 0.3 + 0.8 * 0.1 = 0.38.
  i = lines.index("greedy_vs_optimal at equal env steps:")
  assert ("400", "0.2800", "0.3800") in tiny.cells(lines[i : i + 12])
  assert ("1000", "0.4000", "0.4333") in tiny.cells(lines[i : i + 12])
  # Equal wall-clock: up to 1 minute; at 0.6 min ndmz 0.32, alphazero 0.33.
  i = lines.index("greedy_vs_optimal at equal train minutes:")
  assert ("0.6", "0.3200", "0.3300") in tiny.cells(lines[i : i + 12])
  assert ("ndmz_s0", "0.400", "0.200", "0.400") in tiny.cells(lines)  # dynamics at the end
  paths = compare.write_report(str(tmp_path), rows, compare.Budget("env_steps", 2000, 1000))
  names = sorted(os.path.basename(p) for p in paths)
  assert names == ["compare.md", "figure2.png", "figure3_alphazero_s0.png", "figure3_ndmz_s0.png"]
  for p in paths:
    assert os.path.getsize(p) > 0


def test_read_rows_drops_an_unfinished_line(tmp_path):
  rows = rows_for("a", "ndmz", 0, [(0, 0, 0, 0.2), (1, 10, 1, 0.3)])
  with open(tmp_path / compare.ROWS_FILE, "w") as f:
    f.write(json.dumps(rows[0]) + "\n" + json.dumps(rows[1])[:20])
  assert compare.read_rows(str(tmp_path)) == rows[:1]


@pytest.mark.slow
def test_compare_end_to_end_trains_scores_exactly_and_resumes(tmp_path, monkeypatch):
  from anakin_mz.runtime import restore
  from anakin_mz.eval import plots
  from envs import nannon_solver as ns
  import envs.bots.nannon as bots_nannon
  import jax

  out = str(tmp_path / "cmp")
  # One run, one point past the start: scoring compiles a search match, the
  # exact table and the dynamics tests each time (minutes on a loaded CPU).
  runs = compare.parse_runs("ndmz", [0])
  budget = compare.Budget("env_steps", 128, 128)
  # The checkout moves on while the run trains: each point's record names
  # the commit the run started from.
  asked = []

  def moving_checkout(where=None):
    asked.append(where)
    return "started" if len(asked) == 1 else "later"

  monkeypatch.setattr(records_lib, "git_commit", moving_checkout)
  rows = compare.compare(NANNON, TINY, runs, budget, out, eval_games=8, say=lambda s: None)
  written = records_lib.read(os.path.join(out, compare.RECORDS_FILE))  # the spec layout's
  assert len(rows[runs[0].label]) == 2
  assert [r.commit for r in written] == ["started", "started"]
  for spec in runs:
    rs = rows[spec.label]
    run_dir = os.path.join(out, spec.label)
    assert rs == compare.read_rows(run_dir)
    env_steps = [r["env_steps"] for r in rs]
    assert env_steps[0] == 0 and env_steps == sorted(env_steps) and env_steps[-1] >= 128
    assert rs[-1]["update_step"] > 0 and rs[-1]["train_s"] > 0
    # Beside the checkpoint, the training behind it (a cut scoring keeps it).
    with open(os.path.join(run_dir, compare_state.TRAINED_FILE)) as f:
      keys = ("update_step", "train_s", "env_steps", "games")
      assert json.load(f) == {k: rs[-1][k] for k in keys}
    # An ordinary run directory: TensorBoard holds the same scores.
    scalars = plots.load_scalars(run_dir)
    steps, values = scalars["exact/greedy_vs_optimal"]
    assert list(steps) == [r["update_step"] for r in rs]
    np.testing.assert_allclose(values, [r["exact/greedy_vs_optimal"] for r in rs], rtol=1e-6)
    # The score is the exact score of the saved network's greedy policy.
    agent = restore.load_agent(os.path.join(run_dir, "checkpoints"), rs[-1]["update_step"])
    policy = agent.greedy_policy()
    table = bots_nannon.policy_table(agent.env, policy, jax.random.PRNGKey(0))
    for opp in ("optimal", "random"):
      want = ns.exact_win_probability(table, opp, agent.env).win_probability
      assert rs[-1][f"exact/greedy_vs_{opp}"] == pytest.approx(want, abs=1e-12)
    assert 0.0 <= rs[-1]["dynamics/top_move_k0"] <= 1.0
  assert os.path.exists(os.path.join(out, "figure2.png"))
  report = tiny.cells(open(os.path.join(out, "compare.md")).read())
  assert any(row[:3] == ("ndmz_s0", "ndmz", "0") for row in report)

  # Resume: nothing left to do, nothing changes.
  again = compare.compare(NANNON, TINY, runs, budget, out, eval_games=8, say=lambda s: None)
  assert again == rows
  # A process killed after training a chunk but before writing its row:
  # the row comes back with the same step and the same scores.
  label = runs[0].label
  path = os.path.join(out, label, compare.ROWS_FILE)
  lines = open(path).read().splitlines(keepends=True)
  with open(path, "w") as f:
    f.writelines(lines[:-1])
  healed = compare.compare(NANNON, TINY, runs, budget, out, eval_games=8, say=lambda s: None)
  for key in ("update_step", "env_steps", "exact/greedy_vs_optimal", "exact/greedy_vs_random"):
    assert healed[label][-1][key] == rows[label][-1][key]
  # Other settings in the same directory (another schedule): a clear error.
  with pytest.raises(ValueError, match="other settings"):
    compare.compare(NANNON, TINY, runs, compare.Budget("env_steps", 512, 256), out, eval_games=8)


def _fake_comparison(out, runs, budget_total=8.0, every=8.0):
  os.makedirs(out)
  spec = {
    "config": "/c.yaml",
    "overrides": [],
    "runs": [{"agent": a, "seed": s, "overrides": []} for a, s in runs],
    "budget": {"unit": "minutes", "total": budget_total, "every": every},
    "eval_games": 8,
    "title": "nannon {'points': 6}: x, seeds y",
  }
  with open(os.path.join(out, compare.SPEC_FILE), "w") as f:
    json.dump(spec, f)
  for a, s in runs:
    os.makedirs(os.path.join(out, f"{a}_s{s}"))
  return out


def test_merge_links_the_runs_of_several_comparisons(tmp_path):
  a = _fake_comparison(str(tmp_path / "a"), [("ndmz", 0), ("alphazero", 0)])
  b = _fake_comparison(str(tmp_path / "b"), [("ndmz", 1), ("tdlambda", 1)])
  out = str(tmp_path / "ab")
  spec = compare.merge(out, [a, b])
  labels = ["ndmz_s0", "ndmz_s1", "alphazero_s0", "tdlambda_s1"]
  assert [f"{r['agent']}_s{r['seed']}" for r in spec["runs"]] == labels
  assert compare.read_spec(out) == spec
  assert spec["budget"] == {"unit": "minutes", "total": 8.0, "every": 8.0}
  assert spec["title"] == "nannon {'points': 6}: ndmz,alphazero,tdlambda, seeds 0 1"
  for label, src in zip(labels, [a, b, a, b]):
    assert os.path.realpath(os.path.join(out, label)) == os.path.realpath(os.path.join(src, label))
  assert compare.merge(out, [a, b]) == spec  # again: the same
  lost = r"holds another comparison \(runs \['ndmz_s0', 'alphazero_s0'\]"
  with pytest.raises(ValueError, match=lost):
    compare.merge(out, [b, _fake_comparison(str(tmp_path / "d"), [("ndmz", 3)])])
  assert compare.read_spec(out) == spec  # left as it was
  e = _fake_comparison(str(tmp_path / "e"), [("alphazero", 1)])
  assert len(compare.merge(out, [a, b, e])["runs"]) == 5  # a merge may grow
  # Runs that started scoring later (`Budget.first`) merge: their points are
  # points of the same schedule.
  late = _fake_comparison(str(tmp_path / "late"), [("ndmz", 4)])
  with open(os.path.join(late, compare.SPEC_FILE)) as f:
    late_spec = json.load(f)
  late_spec["budget"]["first"] = 4.0
  with open(os.path.join(late, compare.SPEC_FILE), "w") as f:
    json.dump(late_spec, f)
  assert len(compare.merge(str(tmp_path / "al"), [a, late])["runs"]) == 3
  c = _fake_comparison(str(tmp_path / "c"), [("ndmz", 2)], budget_total=16.0)
  with pytest.raises(ValueError, match="other settings.*budget"):
    compare.merge(str(tmp_path / "ac"), [a, c])
  # TD(lambda), drawn as a level, may have trained on its own config and
  # budget (to its plateau), on the same game; it never sets the settings.
  td = _fake_comparison(str(tmp_path / "td"), [("tdlambda", 0)], budget_total=30.0)
  with open(os.path.join(td, compare.SPEC_FILE)) as f:
    td_spec = dict(json.load(f), config="/td.yaml")
  with open(os.path.join(td, compare.SPEC_FILE), "w") as f:
    json.dump(td_spec, f)
  merged = compare.merge(str(tmp_path / "tda"), [td, a])
  assert merged["config"] == "/c.yaml" and merged["budget"]["total"] == 8.0
  assert [r["agent"] for r in merged["runs"]] == ["tdlambda", "ndmz", "alphazero"]
  with open(os.path.join(td, compare.SPEC_FILE), "w") as f:
    json.dump(dict(td_spec, title="nannon {'points': 12}: tdlambda, seeds 0"), f)
  with pytest.raises(ValueError, match="other settings \\(game: \"nannon {'points': 6}\""):
    compare.merge(str(tmp_path / "tdb"), [a, td])
  with pytest.raises(ValueError, match="'ndmz_s0' is in both"):
    compare.merge(str(tmp_path / "aa"), [a, a])
  with pytest.raises(ValueError, match="at least two"):
    compare.merge(str(tmp_path / "x"), [a])
  with pytest.raises(ValueError, match="holds no comparison"):
    compare.merge(str(tmp_path / "y"), [a, str(tmp_path)])


def test_a_games_budget_reports_each_round_with_its_interval(tmp_path):
  """The paper's rounds: a score at each scored round (300 games, rounded:
  a point ends with the step that reached its games), a match's win rate
  with its Wilson interval, and Figure 2 against rounds too."""

  def row(games, step, win, low, high, exact):
    return {
      "label": "ndmz_s0", "agent": "ndmz", "seed": 0, "update_step": step,
      "env_steps": 25.0 * games, "games": games, "train_s": 6.0 * step,
      "match/search_vs_optimal": win, "match/search_vs_optimal_low": low,
      "match/search_vs_optimal_high": high, "exact/greedy_vs_optimal": exact,
    }  # fmt: skip

  rows = {"ndmz_s0": [row(0.0, 0, 0.1, 0.08, 0.12, 0.3), row(612.0, 40, 0.4, 0.37, 0.43, 0.45)]}
  text = compare.markdown(rows, compare.Budget("games", 900, 600), "t")
  lines = text.splitlines()
  i = lines.index("search_vs_optimal by round (300 self-play games each):")
  assert tiny.cells(lines[i + 2 : i + 6]) == [
    ("round", "ndmz_s0"),
    ("---", "---"),
    ("0", "0.100 [0.080, 0.120]"),
    ("2", "0.400 [0.370, 0.430]"),
  ]
  i = lines.index("greedy_vs_optimal by round (300 self-play games each):")
  assert tiny.cells(lines[i + 4 : i + 6]) == [("0", "0.3000"), ("2", "0.4500")]
  paths = compare.write_report(str(tmp_path), rows, compare.Budget("games", 900, 600))
  assert "figure2.png" in {os.path.basename(p) for p in paths}


def test_td_lambda_is_a_flat_line_at_its_trained_average(tmp_path):
  """The paper draws TD(lambda) as a level across Figure 2, "the average
  results of a trained TD-Lambda agent": the mean of its points in the second
  half of its training, per score key it has; the searching agents stay
  curves."""

  def row(agent, games, win, value=None):
    r = {
      "label": f"{agent}_s0", "agent": agent, "seed": 0, "update_step": int(games),
      "env_steps": 25.0 * games, "games": games, "train_s": 1.0 * games,
      "match/search_vs_optimal": win,
    }  # fmt: skip
    if value is not None:
      r["exact/value_vs_optimal"] = value
      r["exact/optimal_vs_random"] = 0.69  # the game's reference: no agent's level
    return r

  rows = {
    "ndmz_s0": [row("ndmz", 0.0, 0.1), row("ndmz", 600.0, 0.4)],
    "tdlambda_s0": [
      row("tdlambda", 0.0, 0.2, 0.25),
      row("tdlambda", 1000.0, 0.375, 0.4),  # before half of its 3,000 updates: left out
      row("tdlambda", 1500.0, 0.5, 0.4),
      row("tdlambda", 3000.0, 0.25, 0.375),
    ],
  }
  assert compare_report.flat_lines(rows, "match/search_vs_optimal") == {"tdlambda_s0": 0.375}
  assert compare_report.flat_lines(rows, "exact/value_vs_optimal") == {"tdlambda_s0": 0.3875}
  assert compare_report.flat_lines({"ndmz_s0": rows["ndmz_s0"]}, "match/search_vs_optimal") == {}
  ref = {"optimal_vs_random": 0.69}
  assert compare_report.flat_lines(rows, "exact/optimal_vs_random", ref) == {}
  text = compare.markdown(rows, compare.Budget("games", 3000, 300), "", {"optimal_vs_random": 0.69})
  assert "optimal_vs_random: 0.6900" not in text
  assert "- tdlambda_s0 search_vs_optimal: 0.3750" in text.splitlines()
  assert "- tdlambda_s0 value_vs_optimal: 0.3875" in text.splitlines()
  paths = compare.write_report(str(tmp_path), rows, compare.Budget("games", 3000, 300))
  assert "figure2.png" in {os.path.basename(p) for p in paths}


def test_games_played_past_the_last_scored_point_are_counted_on_resume():
  """A chunk that trained on and lost its scoring (interrupted) left a
  checkpoint past the last row: its games count toward the next round, at
  the games per env step measured so far (else the rounds would shift)."""
  last = {"env_steps": 1000.0, "games": 40.0}
  # The first step after resuming: 100 transitions taking the total to 1,700.
  step = {"env_steps": 1700.0, "transitions": 100.0, "episodes": 5.0}
  unscored = compare_state.unscored_games
  assert unscored(last, step) == 600.0 * 0.04
  assert unscored(last, dict(step, env_steps=1100.0)) == 0.0  # resumed at the row
  assert unscored(None, dict(step, env_steps=100.0)) == 0.0  # a fresh run
  # No row yet (a first point past the start) and a cut first chunk: the gap
  # runs from the start, at this step's games per env step.
  assert unscored(None, step) == 1600.0 * 0.05
  untrained = {"env_steps": 0.0, "games": 0.0}  # from the untrained point: this step's rate
  assert unscored(untrained, dict(step, episodes=4.0)) == 1600.0 * 0.04
  # Where the checkpoint was saved with its count, the count is used, and
  # only for that checkpoint (its env steps).
  saved = {"update_step": 480, "train_s": 9.0, "env_steps": 1600.0, "games": 63.0}
  assert compare_state.saved_games(saved, 1600.0) == 63.0
  assert compare_state.saved_games(saved, 1500.0) is None  # another checkpoint
  assert compare_state.saved_games({"update_step": 480, "train_s": 9.0}, 1600.0) is None  # older
  assert compare_state.saved_games(None, 1600.0) is None


def test_seconds_trained_past_the_last_scored_point_are_kept_on_resume(tmp_path):
  last = {"update_step": 400, "train_s": 100.0}
  trained_seconds = compare_state.trained_seconds
  # A chunk trained on to update 480 (130 s in all), then its scoring was cut.
  assert trained_seconds(last, {"update_step": 480, "train_s": 130.0}) == 130.0
  assert trained_seconds(last, {"update_step": 400, "train_s": 100.0}) == 100.0
  assert trained_seconds(last, {"update_step": 320, "train_s": 80.0}) == 100.0  # older
  assert trained_seconds(last, None) == 100.0
  assert trained_seconds(None, {"update_step": 80, "train_s": 20.0}) == 20.0
  assert trained_seconds(None, None) == 0.0
  # The file: written whole, read back; one cut while writing reads as none.
  compare_state.write_trained(str(tmp_path), 480, 130.0, 1600.0, 63.0)
  want = {"update_step": 480, "train_s": 130.0, "env_steps": 1600.0, "games": 63.0}
  assert compare_state.read_trained(str(tmp_path)) == want
  (tmp_path / compare_state.TRAINED_FILE).write_text('{"update_st')
  assert compare_state.read_trained(str(tmp_path)) is None


def test_a_checkpoint_past_the_last_point_is_scored_as_it_is(tmp_path, monkeypatch):
  """`compare(score_now=True)` per run: the latest checkpoint, where it is
  past the last point, is scored at the step, env steps and games saved
  beside it; without a saved count it is refused, naming the fix."""
  from anakin_mz.runtime import checkpoint as ckpt

  spec, run_dir, said = compare.RunSpec("ndmz", 0), str(tmp_path), []
  scored = []

  def score(*args):
    scored.append(args)

  def as_is(steps, rows):
    monkeypatch.setattr(ckpt, "steps", lambda d: steps)
    compare._score_as_is(spec, rows, run_dir, score, said.append)

  as_is((400,), [{"update_step": 400}])  # scored already
  as_is((), [])  # never trained
  assert not scored and all("nothing to score" in s for s in said)
  compare_state.write_trained(run_dir, 480, 130.0, 1600.0, 63.0)
  as_is((400, 480), [{"update_step": 400}])
  assert scored == [(spec, 480, 1600.0, 63.0, 0.0)]
  # Saved by an older anakin-mz (no count), or for another checkpoint.
  for trained in ({"update_step": 480, "train_s": 1.0}, {"update_step": 440, "games": 1.0}):
    (tmp_path / compare_state.TRAINED_FILE).write_text(json.dumps(trained))
    with pytest.raises(ValueError, match="no saved game count.*without --score-now"):
      as_is((400, 480), [{"update_step": 400}])
  assert len(scored) == 1


@pytest.mark.slow
def test_a_run_stopped_by_a_signal_is_scored_where_it_stopped(tmp_path, monkeypatch):
  """SIGTERM between two points (a device's deadline): the checkpoint is
  saved with the games its steps played, and `score_now` scores it there,
  training nothing; the count is the sum of the steps' episodes."""
  import signal

  from anakin_mz.runtime import run as run_lib

  train, seen, signalled, calls = run_lib.train, [], [], [0]

  def train_until_sigterm(config, **kw):
    stop = kw.pop("stop")

    def stop_and_signal(row):
      seen.append(row["episodes"])
      if sum(seen) > 0 and len(seen) >= 3 and len(signalled) < calls[0]:  # after some games
        signalled.append(os.kill(os.getpid(), signal.SIGTERM))
      return stop(row)

    calls[0] += 1
    return train(config, stop=stop_and_signal, **kw)

  runs, out = compare.parse_runs("ndmz", [0]), str(tmp_path)
  budget = compare.Budget("games", 10_000, 10_000, first=10_000)
  monkeypatch.setattr(run_lib, "train", train_until_sigterm)
  said = []
  rows = compare.compare(NANNON, TINY, runs, budget, out, eval_games=4, say=said.append)
  assert rows == {"ndmz_s0": []} and any("SIGTERM while training" in s for s in said)
  saved = compare_state.read_trained(os.path.join(out, "ndmz_s0"))
  assert signalled and saved["games"] == sum(seen) > 0
  # Resumed and stopped again after one step: the count goes on from the
  # one saved (not from an estimate).
  compare.compare(NANNON, TINY, runs, budget, out, eval_games=4, say=said.append)
  saved = compare_state.read_trained(os.path.join(out, "ndmz_s0"))
  assert len(signalled) == 2 and saved["games"] == sum(seen)

  def no_training(*a, **k):
    raise AssertionError("score_now trained")

  monkeypatch.setattr(run_lib, "train", no_training)
  rows = compare.compare(NANNON, TINY, runs, budget, out, eval_games=4, score_now=True)
  (row,) = rows["ndmz_s0"]
  assert (row["update_step"], row["games"]) == (saved["update_step"], sum(seen))
  assert row["env_steps"] == saved["env_steps"] > 0
  assert 0 <= row["exact/greedy_vs_optimal"] <= 1


def test_the_search_exact_score_and_its_match_get_distinct_columns():
  """`--score paper` scores the search exactly and in a match against the
  same opponent: the two keep their prefixes, so no two columns share a
  name; a key alone under its short name loses the prefix."""
  row = {
    "label": "ndmz_s0", "agent": "ndmz", "seed": 0, "update_step": 40, "env_steps": 900.0,
    "games": 612.0, "train_s": 60.0, "exact/search_vs_optimal": 0.39,
    "match/search_vs_optimal": 0.4, "match/search_vs_optimal_low": 0.37,
    "match/search_vs_optimal_high": 0.43, "exact/greedy_vs_optimal": 0.38,
  }  # fmt: skip
  text = compare.markdown({"ndmz_s0": [row]}, compare.Budget("games", 900, 600), "t")
  lines = text.splitlines()
  head, _, first = tiny.cells(lines[2:5])
  assert head[6:] == ("greedy_vs_optimal", "exact/search_vs_optimal", "match/search_vs_optimal")
  assert first[6:] == ("0.3800", "0.3900", "0.4000")
  assert "exact/search_vs_optimal by round (300 self-play games each):" in lines
  assert "match/search_vs_optimal by round (300 self-play games each):" in lines


def test_the_paper_scoring_refuses_what_it_cannot_score():
  with pytest.raises(ValueError, match="at least one opponent"):
    compare.PaperScoring(opponents=())
  with pytest.raises(ValueError, match=r"\['policy'\] unknown: .*greedy, search, value"):
    compare.PaperScoring(exact=("greedy", "policy"))


def test_an_unknown_opponent_fails_before_any_training(tmp_path):
  runs = compare.parse_runs("ndmz", [0])
  with pytest.raises(ValueError, match="unknown opponent 'optimall' for nannon"):
    compare.compare(
      NANNON,
      TINY,
      runs,
      compare.Budget("games", 8, 8),
      str(tmp_path),
      eval_games=2,
      scoring=compare.PaperScoring(opponents=("optimall",)),
    )
  assert not os.path.exists(os.path.join(tmp_path, "ndmz_s0"))


@pytest.mark.slow
def test_a_paper_comparison_trains_in_rounds_and_scores_the_search(tmp_path):
  """Two rounds of 8 games of a tiny NDMZ on Nannon with the paper's tree,
  scored by its own search against optimal and random, exactly beside."""
  over = TINY + [
    "search.tree=paper",
    "search.max_num_considered_actions=16",
    "network.noop_action=true",
    "network.normalize_latent=false",
  ]
  runs = compare.parse_runs("ndmz", [0])
  budget = compare.Budget("games", 16, 8)
  scoring = compare.PaperScoring(exact=("greedy", "value"))
  rows = compare.compare(NANNON, over, runs, budget, str(tmp_path), eval_games=4, scoring=scoring)
  rs = rows["ndmz_s0"]
  assert [r["games"] >= g for r, g in zip(rs, (0, 8, 16))] == [True] * 3 and len(rs) == 3
  for r in rs:
    for opp in ("optimal", "random"):
      assert r[f"match/search_vs_{opp}_low"] <= r[f"match/search_vs_{opp}"]
      assert r[f"match/search_vs_{opp}"] <= r[f"match/search_vs_{opp}_high"]
    assert 0 < r["exact/greedy_vs_optimal"] < 0.5 and 0 < r["exact/value_vs_optimal"] < 0.5
    assert "exact/search_vs_optimal" not in r
  # Resuming a finished comparison trains and scores nothing more.
  again = compare.compare(NANNON, over, runs, budget, str(tmp_path), eval_games=4, scoring=scoring)
  assert again["ndmz_s0"] == rs


def test_a_paper_point_is_recorded_with_its_interval_and_command():
  """A scored point's run record: a match's win rate as one figure with its
  Wilson interval, the games played, and a command that reruns the run."""
  s = compare.RunSpec("ndmz", 0)
  spec = {
    "config": "/c/paper.yaml",
    "overrides": ["train.batch_size=8"],
    "budget": {"unit": "games", "total": 600.0, "every": 300.0},
    "eval_games": 1000,
    "scoring": {"opponents": ["optimal", "random"], "exact": ["greedy"]},
  }
  row = {
    "update_step": 40, "env_steps": 7600.0, "games": 303.0, "train_s": 90.0,
    "match/search_vs_optimal": 0.4, "match/search_vs_optimal_low": 0.37,
    "match/search_vs_optimal_high": 0.43, "exact/greedy_vs_optimal": 0.45,
  }  # fmt: skip
  config = config_lib.load(NANNON, TINY)
  r = compare._record("/runs/p636", s, row, spec, config)
  assert r.experiment == "p636" and r.variant == "ndmz" and r.seed == 0
  assert r.figures["match/search_vs_optimal"] == records_lib.Figure(0.4, 0.37, 0.43)
  assert r.figures["exact/greedy_vs_optimal"] == records_lib.Figure(0.45)
  assert set(r.figures) == {"match/search_vs_optimal", "exact/greedy_vs_optimal"}
  assert r.evaluation["games_played"] == 303.0 and r.budget.updates == 40
  assert "--games=600 --every=300" in r.command
  assert "--score=paper --score-opponents=optimal,random --exact=greedy" in r.command
  assert r.command.endswith("train.batch_size=8")
  assert "--score-from" not in r.command
  spec["budget"] = {**spec["budget"], "first": 1500.0}
  assert (
    "--every=300 --score-from=1500 --eval-games"
    in compare._record("/r", s, row, spec, config).command
  )


def test_a_report_is_drawn_again_from_the_records_of_its_points(tmp_path):
  """`rows_from_records` inverts `_record`: the rows of a comparison whose
  run directories are gone, one line per variant and seed, by update; a
  point recorded twice (a repeated run) appears once, the later record's."""
  s = compare.RunSpec("ndmz", 0)
  spec = {
    "config": "/c/paper.yaml", "overrides": [], "eval_games": 1000,
    "budget": {"unit": "games", "total": 600.0, "every": 300.0},
    "scoring": {"opponents": ["optimal"], "exact": ["greedy"]},
  }  # fmt: skip
  config = config_lib.load(NANNON, TINY)

  def row(step, value):
    return {
      "update_step": step, "env_steps": 190.0 * step, "games": 7.5 * step, "train_s": 2.0 * step,
      "match/search_vs_optimal": value, "match/search_vs_optimal_low": value - 0.03,
      "match/search_vs_optimal_high": value + 0.03, "exact/greedy_vs_optimal": value / 2,
    }  # fmt: skip

  recs = [compare._record("/runs/p636", s, row(step, v), spec, config) for step, v in
          ((40, 0.4), (0, 0.3), (40, 0.41))]  # fmt: skip
  recs.append(compare._record("/runs/other", s, row(80, 0.5), spec, config))
  again = {**spec, "budget": {**spec["budget"], "first": 300.0}}  # the run repeated
  recs.append(compare._record("/runs/p636", s, row(40, 0.42), again, config))
  # The first run extended to a larger budget, its --out spelled otherwise:
  # the same run (`_run_of`), not a third.
  longer = {**spec, "budget": {**spec["budget"], "total": 1200.0}}
  recs.append(compare._record("/work/runs/p636/", s, row(120, 0.45), longer, config))
  out = records_lib.repo_path("/work/runs/p636/")  # as the record writes it: the root's
  assert "--games=1200" in recs[-1].command and f"--out={out} " in recs[-1].command

  # A point of before, its config's path absolute (the root's), is of the
  # same run as those written after, relative.
  def spelled(r, config):
    return dataclasses.replace(r, command=r.command.replace("/c/paper.yaml", config))

  relative = [spelled(r, "c/paper.yaml") for r in recs]
  mixed = relative[:-1] + [spelled(recs[-1], os.path.join(records_lib.repo_root(), "c/paper.yaml"))]
  assert list(compare.rows_from_records(relative, "p636")) == ["ndmz_s0", "ndmz_s0_run2"]
  assert compare.rows_from_records(mixed, "p636") == compare.rows_from_records(relative, "p636")
  rows = compare.rows_from_records(recs, "p636")
  assert list(rows) == ["ndmz_s0", "ndmz_s0_run2"]
  want = [dict(row(0, 0.3), label="ndmz_s0", agent="ndmz", seed=0)]
  want.append(dict(row(40, 0.41), label="ndmz_s0", agent="ndmz", seed=0))
  want.append(dict(row(120, 0.45), label="ndmz_s0", agent="ndmz", seed=0))
  assert rows["ndmz_s0"] == want
  assert rows["ndmz_s0_run2"] == [dict(row(40, 0.42), label="ndmz_s0_run2", agent="ndmz", seed=0)]
  with pytest.raises(ValueError, match="no records of experiment 'p1256'; there: other, p636"):
    compare.rows_from_records(recs, "p1256")
  compare.write_report(str(tmp_path), rows, compare.Budget("games", 300.0, 300.0))
  text = (tmp_path / "compare.md").read_text()
  assert "0.410 [0.380, 0.440]" in text  # the round table, with the match's interval


def test_the_cli_draws_a_report_from_records_and_refuses_bad_input(tmp_path, monkeypatch, capsys):
  from anakin_mz.cli import compare as compare_cli

  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path / "cache"))
  s = compare.RunSpec("ndmz", 0)
  spec = {
    "config": "/c.yaml", "overrides": [], "eval_games": 8,
    "budget": {"unit": "games", "total": 600.0, "every": 300.0},
  }  # fmt: skip
  row = {"update_step": 8, "env_steps": 400.0, "games": 300.0, "train_s": 6.0}
  row["exact/greedy_vs_optimal"] = 0.25
  path = str(tmp_path / "r.jsonl")
  records_lib.write(path, [compare._record("/x/p636", s, row, spec, config_lib.load(NANNON, TINY))])
  base = ["--from-records", path, "p636", "--out", str(tmp_path / "rep"), "--devices", "1"]
  assert compare_cli.main(base + ["--env", "nannon"]) == 0
  assert any(
    row[0] == "ndmz_s0" for row in tiny.cells((tmp_path / "rep" / "compare.md").read_text())
  )
  assert compare_cli.main(base[:2] + ["p1256"] + base[3:] + ["--env", "nannon"]) == 2
  assert "error: no records of experiment 'p1256'; there: p636" in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    compare_cli.main(base)
  assert e.value.code == 2 and "--from-records needs --env" in capsys.readouterr().err


_FROM = ["--from-records", "r.jsonl", "p636", "--env", "nannon"]


@pytest.mark.parametrize(
  "argv, says",
  [
    (
      ["--report-only", "--score-now"],
      "--report-only only draws the report (it reads the settings saved in --out); "
      "it does not use --score-now",
    ),
    (["--merge", "a", "b", "--games", "600", "--every", "300"], "does not use --games, --every"),
    (
      ["--report-only", "--env", "nannon", "search.num_simulations=8"],
      "--env, the overrides search.num_simulations=8",
    ),
    (
      _FROM + ["--score-now"],
      "(it reads --env, --config and overrides); it does not use --score-now",
    ),
    (_FROM + ["--agents", "alphazero"], "does not use --agents"),
    (
      ["--report-only", "--merge", "a", "b"],
      "argument --merge: not allowed with argument --report-only",
    ),
  ],
)
def test_the_cli_refuses_a_report_mode_with_an_option_it_would_ignore(argv, says, tmp_path, capsys):
  """`--score-now` (or a budget, an agent, an override) beside a mode that
  only draws the report was silently ignored: now it exits 2, naming it,
  before JAX starts or anything is read."""
  from anakin_mz.cli import compare as compare_cli

  with pytest.raises(SystemExit) as e:
    compare_cli.main(argv + ["--out", str(tmp_path / "none")])
  err = capsys.readouterr().err
  assert e.value.code == 2 and says in err and "Traceback" not in err
  assert not (tmp_path / "none").exists()


def test_the_cli_exits_cleanly_when_a_signal_stops_the_first_point(tmp_path, monkeypatch):
  """A signal during the first point's training (`--score-from`) leaves a
  checkpoint and no report yet: the CLI returns 0 without a traceback."""
  from anakin_mz.cli import compare as compare_cli

  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path / "cache"))
  calls = []
  monkeypatch.setattr(compare, "compare", lambda *a, **k: calls.append(a) or {})
  out = tmp_path / "c"
  argv = ["--env", "nannon", "--games", "600", "--every", "300", "--score-from", "600"]
  assert compare_cli.main(argv + ["--out", str(out), "--devices", "1"]) == 0
  assert len(calls) == 1 and not (out / "compare.md").exists()


def test_a_larger_budget_extends_a_comparison_and_nothing_else_does(tmp_path):
  """The same comparison with a larger total (same unit and schedule) goes
  on where it stopped; any other change is refused, naming it."""
  out = str(tmp_path)
  spec = {"config": "c.yaml", "overrides": [], "runs": [], "eval_games": 8}
  spec["budget"] = {"unit": "games", "total": 600.0, "every": 300.0}
  compare._check_spec(out, spec, "t")
  longer = {**spec, "budget": {"unit": "games", "total": 3000.0, "every": 300.0}}
  compare._check_spec(out, longer, "t")
  assert compare.read_spec(out)["budget"]["total"] == 3000.0
  for budget in (
    {"unit": "games", "total": 600.0, "every": 300.0},  # shorter
    {"unit": "games", "total": 6000.0, "every": 600.0},
  ):  # another schedule
    with pytest.raises(ValueError, match="other settings"):
      compare._check_spec(out, {**spec, "budget": budget}, "t")
  with pytest.raises(ValueError, match="other settings.*eval_games"):
    compare._check_spec(out, {**longer, "eval_games": 10}, "t")
