"""Evaluation (the `anakin_mz.eval` library, and the scripts run as commands)
on tiny checkpoints: restore errors (wrong path, wrong
game, incompatible network, corrupt step), opponent specs, one tiny
end-to-end evaluation per game, and the tournament / plot / search-tree /
play scripts."""

import os
import shutil
import xml.dom.minidom

import jax
import numpy as np
import pytest
import tiny

import envs
import envs.bots
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz.eval import opponents, report
from anakin_mz.experiments import records
from anakin_mz.agents.replay_learner import Learner

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
TINY = [
  "network.hidden=[8]",
  "network.latent_dim=8",
  "search.num_simulations=2",
  "search.max_num_considered_actions=2",  # <= the simulations (a Gumbel root's m)
  "train.num_envs=2",
  "train.batch_size=4",
  "train.rollout_length=2",
  "train.replay_capacity=16",
  "train.min_replay=1",
  "train.unroll_steps=2",
]


def save_tiny(directory, env_name, steps=(3,), overrides=(), state_overrides=None):
  """Saves a fresh TrainState of a tiny config at `steps`. With
  `state_overrides` the arrays come from another config (a mismatch)."""
  cfg = config_lib.load(env_name, TINY + list(overrides))
  arrays_cfg = (
    cfg if state_overrides is None else config_lib.load(env_name, TINY + list(state_overrides))
  )
  learner = Learner(arrays_cfg)
  for step in steps:
    state = jax.tree.map(np.asarray, learner.init(jax.random.PRNGKey(step)))
    meta = ckpt.make_metadata(cfg.to_dict(), learner.env.id, learner.env.version, step)
    ckpt.save(str(directory), step, state, meta)
  return str(directory)


@pytest.fixture(scope="module")
def nannon_ckpt(tmp_path_factory):
  return save_tiny(tmp_path_factory.mktemp("nannon") / "checkpoints", "nannon", steps=(3, 6))


@pytest.fixture(scope="module")
def catch_ckpt(tmp_path_factory):
  return save_tiny(tmp_path_factory.mktemp("catch") / "checkpoints", "catch")


def _error(directory, **kwargs):
  """The message of the ValueError `report.evaluate_checkpoint` raises."""
  with pytest.raises(ValueError) as e:
    report.evaluate_checkpoint(directory, **kwargs)
  return str(e.value)


def test_missing_path_is_a_clear_error(tmp_path):
  missing = str(tmp_path / "nope")
  err = _error(missing)
  assert "does not exist" in err and missing in err
  empty = tmp_path / "empty"
  empty.mkdir()
  err = _error(str(empty))
  assert "no checkpoints found" in err and str(empty) in err


def test_missing_step_is_a_clear_error(nannon_ckpt):
  err = _error(nannon_ckpt, step=999)
  assert "step 999 is not in" in err and "saved steps: 3, 6" in err


def test_wrong_game_is_a_clear_error(nannon_ckpt, catch_ckpt):
  err = _error(catch_ckpt, expect_env="nannon")
  assert "is for env 'catch', not 'nannon'" in err and catch_ckpt in err
  with pytest.raises(ckpt.CheckpointError, match="is for env 'catch', not 'nannon'"):
    opponents.make_opponent(f"checkpoint:{catch_ckpt}", envs.make("nannon"))


def test_incompatible_network_is_a_clear_error(tmp_path):
  # The metadata says hidden=[8], the saved arrays are of hidden=[12].
  directory = save_tiny(tmp_path / "ck", "catch", state_overrides=["network.hidden=[12]"])
  err = _error(directory)
  assert "does not fit this network/config" in err or "another network" in err
  assert directory in err


def test_corrupt_step_is_a_clear_error(tmp_path, catch_ckpt):
  directory = str(tmp_path / "ck")
  shutil.copytree(catch_ckpt, directory)
  state_dir = os.path.join(directory, "3", "state")
  for root, _, files in os.walk(state_dir):
    for f in files:
      if not f.startswith("_"):
        with open(os.path.join(root, f), "wb") as fh:
          fh.write(b"garbage")
  err = _error(directory)
  # One line that names the step, not TensorStore's spec (12 lines of it).
  assert err.startswith(f"checkpoint {directory!r} step 3 is unreadable: corrupt or incomplete")
  assert "\n" not in err and "tensorstore_spec" not in err and len(err) < 400, err


def test_a_runs_logdir_stands_for_its_checkpoints(catch_ckpt):
  # `--checkpoint runs/catch` said "no checkpoints found": every reader
  # locates <logdir>/checkpoints (checkpoint.locate), so every tool takes it.
  from anakin_mz.runtime import restore

  logdir = os.path.dirname(catch_ckpt)
  assert ckpt.locate(logdir) == catch_ckpt and ckpt.steps(logdir) == (3,)
  assert ckpt.load_metadata(logdir)["step"] == 3
  agent = restore.load_agent(logdir, expect_env="catch")
  assert agent.directory == catch_ckpt and agent.step == 3


def test_opponent_specs():
  nannon = envs.make("nannon")
  catch = envs.make("catch")
  with pytest.raises(ValueError, match="exact solver"):
    opponents.make_opponent("optimal", catch)
  with pytest.raises(ValueError, match="deterministic two-player zero-sum"):
    opponents.make_opponent("mcts:8", nannon)
  with pytest.raises(ValueError, match="einstein"):
    opponents.make_opponent("expectiminimax:2", nannon)
  with pytest.raises(ValueError, match="depth must be >= 1"):
    opponents.make_opponent("expectiminimax:0", envs.make("einstein"))
  with pytest.raises(ValueError, match="simulations must be an integer"):
    opponents.make_opponent("mcts:x", envs.make("breakthrough"))
  with pytest.raises(ValueError, match="unknown opponent 'minimax'"):
    opponents.make_opponent("minimax", nannon)
  assert opponents.make_opponent("mcts", envs.make("breakthrough")).name == "mcts:64"
  assert opponents.parse_checkpoint_spec("a/b@12") == ("a/b", 12)
  assert opponents.parse_checkpoint_spec("a/b") == ("a/b", None)


@pytest.mark.slow
def test_optimal_opponent_beats_random():
  from anakin_mz.eval import match

  nannon = envs.make("nannon")
  opt = opponents.make_opponent("optimal", nannon)
  res = jax.jit(lambda k: match.play_match(nannon, opt.policy, envs.random_policy, k, 64))(
    jax.random.PRNGKey(0)
  )
  assert float(np.mean(np.asarray(res.score) > 0)) > 0.5


@pytest.mark.parametrize("game", sorted(envs.registered(adapted=False)))
def test_tiny_end_to_end_evaluation(game, tmp_path):
  directory = save_tiny(tmp_path / "ck", game)
  r = report.evaluate_checkpoint(directory, opponent="random", games=4, seed=1, extra=False)
  # A config that plays the expectimax (Nannon's) runs no simulations.
  tree = config_lib.load(game, TINY).playing_search.root != "expectimax"
  assert r["game"] == game and r["step"] == 3 and r["simulations"] == (2 if tree else 0)
  assert r.get("search_root") == (None if tree else "expectimax")
  assert r["checkpoint"] == os.path.abspath(directory)
  if envs.make(game).payoff == "zero_sum":
    wdl = r["wdl"]
    assert sum(wdl[k]["count"] for k in ("win", "draw", "loss")) == 4
    assert all(r["by_seat"][s]["games"] == 2 for s in ("0", "1"))
    assert wdl["win"]["low"] <= wdl["win"]["rate"] <= wdl["win"]["high"]
  else:
    assert "wdl" not in r and r["opponent"].startswith("none")
  assert r["score"]["low"] <= r["score"]["mean"] <= r["score"]["high"]
  text = report.format_report(r)
  assert game in text and "step 3" in text


@pytest.mark.slow  # compiles several searches: minutes on a busy 2-core CPU
def test_nannon_evaluation_cli_with_exact_scores_and_diagnostics(nannon_ckpt, tmp_path):
  out_json = str(tmp_path / "e.json")
  out = tiny.run_script(
    "evaluate",
    "--checkpoint",
    nannon_ckpt,
    "--step",
    "3",
    "--games",
    "4",
    "--opponent",
    "optimal",
    "--diagnostics",
    "--diagnostic-games",
    "4",
    "--json",
    out_json,
  )
  assert out.returncode == 0, out.stderr
  text = out.stdout
  assert "win" in text and "95% Wilson interval" in text
  assert "search policy table" in text and "top-move" in text
  import json

  with open(out_json, encoding="utf-8") as f:
    data = json.load(f)
  for k in ("greedy_vs_optimal", "greedy_vs_random", "search_vs_optimal", "search_vs_random"):
    assert 0.0 <= data["exact"][k] <= 1.0
  # Exact: the optimal player beats random with probability about 0.69.
  assert data["exact"]["optimal_vs_random"] == pytest.approx(0.69, abs=0.02)
  assert data["dynamics"]["depth"] == [0, 1, 2]
  assert data["step"] == 3


def test_value_agent_plays_the_value_head_and_bad_kinds_are_named(nannon_ckpt):
  r = report.evaluate_checkpoint(nannon_ckpt, games=4, agent_kind="value")
  assert r["agent"] == "value" and r["simulations"] == 0 and r["games"] == 4
  text = report.format_report(r)
  assert "ndmz value, 1-ply expectimax" in text and "value head, expectimax on the game" in text
  # Nannon's exact evaluator scores the value player beside the other two.
  assert sorted(k for k in r["exact"] if k.endswith("_vs_optimal")) == [
    "greedy_vs_optimal",
    "search_vs_optimal",
    "value_vs_optimal",
  ]
  assert 0.0 < r["exact"]["value_vs_random"] < 1.0
  with pytest.raises(ValueError, match=r"--player must be one of \('search', 'greedy', 'value'\)"):
    report.evaluate_checkpoint(nannon_ckpt, games=4, agent_kind="policy")
  # extra_policies picks what the exact evaluator scores, with the same figures.
  sub = report.evaluate_checkpoint(
    nannon_ckpt, games=4, agent_kind="value", extra_policies=["value", "greedy"]
  )
  assert sorted(k for k in sub["exact"] if k.endswith("_vs_optimal")) == [
    "greedy_vs_optimal",
    "value_vs_optimal",
  ]
  for k in ("greedy_vs_optimal", "value_vs_random"):
    assert sub["exact"][k] == r["exact"][k]
  assert "search policy table" not in report.format_report(sub)
  # Asked for by name, the value player is scored whatever plays the match
  # (the paper's scoring: the search plays, the value head is scored beside).
  # Here the greedy head plays: the same branch, without compiling a match of
  # the search (test_tiny_end_to_end_evaluation plays one on Nannon).
  played = report.evaluate_checkpoint(
    nannon_ckpt, games=4, agent_kind="greedy", extra_policies=["value"]
  )
  assert played["agent"] == "greedy"
  assert played["exact"]["value_vs_optimal"] == r["exact"]["value_vs_optimal"]
  assert "greedy_vs_optimal" not in played["exact"] and "search_vs_optimal" not in played["exact"]
  for bad, kind in ((["policy"], "value"), ([], "search")):
    with pytest.raises(ValueError, match="non-empty subset of greedy, search, value"):
      report.evaluate_checkpoint(nannon_ckpt, games=4, agent_kind=kind, extra_policies=bad)


def test_extra_policies_on_a_game_without_extra_evaluators_are_refused(catch_ckpt):
  # Catch (as Carchess, EinStein, Breakthrough) has no extra evaluator: the
  # named policies would be silently dropped, so the request is refused.
  with pytest.raises(ValueError, match="catch has no extra evaluator"):
    report.evaluate_checkpoint(catch_ckpt, games=2, extra_policies=["greedy"])


def test_last_checkpoints_pool_the_same_games_of_each_step(nannon_ckpt, catch_ckpt):
  """`evaluate_last_checkpoints` plays evaluate_checkpoint's games at each
  of the newest steps and reports the games put together; the steps'
  own figures stay beside them. Asking for more steps than saved, or for
  a step too, is a clear error."""
  kw = dict(games=40, seed=3, extra=False)
  each = [report.evaluate_checkpoint(nannon_ckpt, step=s, **kw) for s in (3, 6)]
  assert each[0]["wdl"] != each[1]["wdl"]  # two different agents: pooling is not trivial
  pooled = report.evaluate_last_checkpoints(nannon_ckpt, 2, **kw)
  assert pooled["step"] == 6 and pooled["games"] == 80
  assert [c["step"] for c in pooled["checkpoints"]] == [3, 6]
  assert [c["wdl"] for c in pooled["checkpoints"]] == [r["wdl"] for r in each]
  for name in ("win", "draw", "loss"):
    assert pooled["wdl"][name]["count"] == sum(r["wdl"][name]["count"] for r in each)
  assert pooled["score"]["mean"] == pytest.approx(np.mean([r["score"]["mean"] for r in each]))
  assert pooled["wdl"]["points"]["mean"] == pytest.approx(
    np.mean([r["wdl"]["points"]["mean"] for r in each])
  )
  assert pooled["by_seat"]["0"]["games"] == 40
  assert "steps 3, 6" in report.format_report(pooled)
  figures = records.figures_of(pooled)  # a run record's: the pooled score, each step's beside
  assert figures["score"].value == pooled["score"]["mean"]
  assert [figures[f"checkpoints.{i}.score"].value for i in (0, 1)] == [
    r["score"]["mean"] for r in each
  ]
  one = report.evaluate_checkpoint(nannon_ckpt, last=1, **kw)  # the one entry point, pooled
  assert one["checkpoints"][0]["step"] == 6 and one["games"] == 40
  assert one["score"] == pytest.approx(each[1]["score"]) and one["wdl"] == each[1]["wdl"]
  with pytest.raises(ValueError, match=r"--last-checkpoints 2: .* holds 1 saved step\(s\) \(3\)"):
    report.evaluate_last_checkpoints(catch_ckpt, 2, games=2)
  with pytest.raises(ValueError, match="cannot go with --step"):
    report.evaluate_checkpoint(nannon_ckpt, last=2, step=3, games=2)
  with pytest.raises(ValueError, match="must be >= 1"):
    report.evaluate_last_checkpoints(nannon_ckpt, 0, games=2)
  with pytest.raises(ValueError, match="--diagnostics tests one checkpoint's model"):
    report.evaluate_last_checkpoints(nannon_ckpt, 2, games=2, diagnostics=True)


def test_odd_games_in_a_two_player_game(nannon_ckpt):
  err = _error(nannon_ckpt, games=3)
  assert "multiple of 2" in err


def _evaluate_main(capsys, *args):
  """`anakin-mz evaluate ARGS` in this process (`tiny.run_main`): its exit
  code and stderr."""
  from anakin_mz.cli import evaluate as evaluate_cli

  code = tiny.run_main(evaluate_cli.main, *args)
  return code, capsys.readouterr().err


def test_evaluate_cli_errors_exit_2_on_stderr(tmp_path, capsys):
  # The first through the script, as a user runs it; the others in this process.
  missing = str(tmp_path / "nope")
  out = tiny.run_script("evaluate", "--checkpoint", missing)
  assert out.returncode == 2 and "does not exist" in out.stderr and missing in out.stderr
  assert "Traceback" not in out.stderr
  code, err = _evaluate_main(capsys, "--bot", "random")
  assert code == 2 and "--bot needs --env" in err
  code, err = _evaluate_main(capsys, "--env", "nannon", "--bot", "random", "--player", "policy")
  assert code == 2 and "argument --player: invalid choice: 'policy'" in err
  assert "Traceback" not in err
  code, err = _evaluate_main(
    capsys, "--checkpoint", missing, "--no-extra", "--extra-policies", "greedy"
  )
  assert code == 2 and "cannot go with --no-extra" in err
  code, err = _evaluate_main(
    capsys, "--checkpoint", missing, "--last-checkpoints", "3", "--step", "4"
  )
  assert code == 2 and "--last-checkpoints picks the steps; it cannot go with --step" in err
  code, err = _evaluate_main(
    capsys, "--env", "nannon", "--bot", "random", "--last-checkpoints", "3"
  )
  assert code == 2 and "--last-checkpoints picks a --checkpoint's steps; a --bot has none" in err
  code, err = _evaluate_main(capsys, "--checkpoint", missing, "--last-checkpoints", "0")
  assert code == 2 and "--last-checkpoints must be >= 1, got 0" in err


def test_bot_errors_name_the_game_and_list_only_its_bots(capsys):
  nannon, breakthrough = envs.make("nannon"), envs.make("breakthrough")
  assert envs.bots.specs(nannon) == ("random", "optimal")
  assert envs.bots.specs(breakthrough) == ("random", "mcts[:simulations]")
  assert "greedy" in envs.bots.specs()  # every game's, without an env
  with pytest.raises(envs.bots.UnknownBotError) as e:
    envs.bots.make_bot("nosuchbot", nannon)
  assert str(e.value) == (
    "unknown bot 'nosuchbot' for nannon; valid: random, optimal (the bots that play nannon)"
  )
  with pytest.raises(ValueError, match=r"exact solver.*the bots that play catch: random$"):
    envs.bots.make_bot("optimal", envs.make("catch"))
  with pytest.raises(ValueError) as e:
    opponents.make_opponent("minimax", breakthrough)
  assert "unknown opponent 'minimax' for breakthrough; valid: random, mcts[:simulations], " in (
    str(e.value)
  )
  assert "optimal" not in str(e.value) and "greedy" not in str(e.value)
  code, err = _evaluate_main(capsys, "--env", "nannon", "--bot", "nosuchbot")
  assert code == 2 and "Traceback" not in err, err
  assert "error: unknown bot 'nosuchbot' for nannon; valid: random, optimal " in err


def test_a_bot_against_a_bot():
  env = envs.make("nannon")
  r = report.evaluate_bot(env, "optimal", opponent="random", games=4, seed=0)
  assert r["agent"] == "optimal" and r["opponent"] == "random" and "checkpoint" not in r
  assert sum(r["wdl"][k]["count"] for k in ("win", "draw", "loss")) == 4
  assert "agent       optimal" in report.format_report(r)


def test_tournament_names_players_by_model_file_shipped_name_or_run(nannon_ckpt, tmp_path):
  # Model files and shipped names were named after the current directory,
  # and two model files of one directory refused as "a player appears twice".
  from anakin_mz.eval import tournament
  from anakin_mz.runtime import export
  from anakin_mz.runtime import restore

  agent = restore.load_agent(nannon_ckpt)
  models = tmp_path / "models"
  for path in (models / "a.msgpack", models / "b.msgpack", tmp_path / "other" / "a.msgpack"):
    export.write(str(path), agent.config, agent.params, 6, "nannon", agent.env.version)

  def players(*specs):
    return [p for s in specs for p in tournament.checkpoint_players(s, None, None, None, False)]

  logdir = os.path.dirname(nannon_ckpt)
  run = os.path.basename(logdir)
  found = players(str(models / "a.msgpack"), str(models / "b.msgpack"), "nannon", logdir)
  tournament.name_apart(found)
  shipped_step = export.read(export.shipped_path("nannon")).step
  assert [p.name for p in found] == ["a@6", "b@6", f"nannon@{shipped_step}", f"{run}@6"]
  # Two files of one stem: named by their paths; one checkpoint twice (a
  # run's logdir and its checkpoints): refused.
  same_stem = players(str(models / "a.msgpack"), str(tmp_path / "other" / "a.msgpack"))
  tournament.name_apart(same_stem)
  assert [p.name for p in same_stem] == [
    f"{models / 'a.msgpack'}@6",
    f"{tmp_path / 'other' / 'a.msgpack'}@6",
  ]
  with pytest.raises(ValueError, match=rf"a player appears twice: {run}@6 \("):
    tournament.name_apart(players(logdir, nannon_ckpt))


@pytest.mark.slow  # compiles several searches: minutes on a busy 2-core CPU
def test_tournament(nannon_ckpt, tmp_path):
  from anakin_mz.eval import tournament

  png = str(tmp_path / "elo.png")
  t = tournament.run_tournament(all_steps=[nannon_ckpt], bots=["random"], games=4)
  tournament.plot_elo(t.fit, t.players, png, "elo")
  out = tournament.format_table(t.fit, t.players)
  assert "Elo" in out and "random" in out and "@3" in out and "@6" in out
  assert os.path.getsize(png) > 1000
  with pytest.raises(ValueError, match="deterministic two-player"):
    tournament.run_tournament(checkpoints=[nannon_ckpt], bots=["mcts"])


def test_plot(tmp_path):
  from anakin_mz.eval import plots
  from anakin_mz.runtime.summary import SummaryWriter

  w = SummaryWriter(str(tmp_path / "run"))
  for step in range(0, 100, 10):
    w.scalars(
      step,
      {
        "train/loss": 1.0 / (step + 1),
        "train/env_steps": 64.0 * step,
        "train/wall_s": 3.0 * step,
        "eval/vs_random_score_mean": step / 100,
        "dynamics/top_move_k0": 0.5,
        "dynamics/top_move_k1": 0.4,
        "dynamics/uniform_k0": 0.7,
      },
    )
  w.close()
  out = str(tmp_path / "plots")
  assert plots.make_plots([str(tmp_path / "run")], out)
  for name in ("learning.png", "learning_wallclock.png", "losses.png", "dynamics_run.png"):
    assert os.path.getsize(os.path.join(out, name)) > 1000
  # the x axes: env steps and minutes, interpolated at the logged updates
  scalars = plots.load_scalars(str(tmp_path / "run"))
  np.testing.assert_allclose(plots._x_values(scalars, np.array([10, 15]), "env_steps"), [640, 960])
  np.testing.assert_allclose(plots._x_values(scalars, np.array([20]), "wall"), [1.0])
  assert plots._x_values({}, np.array([20]), "wall") is None
  with pytest.raises(ValueError, match="does not exist"):
    plots.make_plots([str(tmp_path / "nothing")])


def test_plot_draws_the_untrained_point_at_env_step_0(tmp_path):
  # As the run loop logs with log_every=10 and eval_every=20: the untrained
  # agent's evaluation at update 0, the rows (x axes) from update 10 on.
  # Runs before the loop logged the axes at its evaluations have no axis at
  # update 0; it was drawn at the first row's 640 env steps.
  from anakin_mz.eval import plots
  from anakin_mz.runtime.summary import SummaryWriter

  w = SummaryWriter(str(tmp_path / "run"))
  w.scalars(0, {"eval/vs_random_score_mean": -1.0})
  for step in range(10, 50, 10):
    w.scalars(step, {"train/env_steps": 64.0 * step, "train/wall_s": 30 + 3.0 * step})
    if step % 20 == 0:
      w.scalars(step, {"eval/vs_random_score_mean": 0.5})
  w.close()
  scalars = plots.load_scalars(str(tmp_path / "run"))
  x, y, label = plots.curve(scalars, "eval/vs_random_score_mean", "env_steps")
  np.testing.assert_allclose(x, [0, 1280, 2560])
  np.testing.assert_allclose(y, [-1.0, 0.5, 0.5])
  assert label == "env steps"
  np.testing.assert_allclose(plots._x_values(scalars, np.array([0, 5, 10]), "wall"), [0, 0.5, 1])
  assert plots.curve(scalars, "eval/vs_random_score_mean")[2] is None  # update steps
  # The final figure of learning.md is the trained agent's: with the whole
  # run in the window, the untrained point is still not averaged in.
  table = plots.learning_table(["run"], [scalars], window=1.0)
  assert "| run | 0.500 | 0.500 |" in table, table
  # Logged as the run loop now logs it (the axes at each evaluation: 0 env
  # steps, the compilation's wall-clock), it is not averaged in either.
  short = dict(scalars)
  short["train/env_steps"] = (np.array([0, 10]), np.array([0.0, 640.0]))
  short["train/wall_s"] = (np.array([0, 10]), np.array([29.0, 30.0]))
  short["eval/vs_random_score_mean"] = (np.array([0, 10]), np.array([-1.0, 0.5]))
  assert plots.value_at(short, "eval/vs_random_score_mean", "wall", 0.5, window=0.1) == 0.5
  assert plots.value_at(short, "eval/vs_random_score_mean", "env_steps", 640) == 0.5
  # Read where no trained point lies in the window: interpolated from update 0's.
  assert plots.value_at(short, "eval/vs_random_score_mean", "env_steps", 320, 0.1) == -0.25


def test_learning_table_reads_every_run_at_the_same_budget():
  from anakin_mz.eval import plots

  def run(n, steps_per_update, seconds_per_update):
    u = np.arange(0, n + 1, 10)
    return {
      "selfplay/return_p0": (u, u / 10.0),  # 0, 1, 2, ...: one per log point
      "train/env_steps": (u, steps_per_update * u.astype(float)),
      "train/wall_s": (u, seconds_per_update * u.astype(float)),
    }

  a = run(100, 100, 6.0)  # ends at 10,000 env steps, 10 min
  b = run(200, 20, 6.0)  # ends at 4,000 env steps, 20 min
  # b reaches 4,000 env steps at update 200; the window [3600, 4000] holds updates 180..200
  assert plots.value_at(b, "selfplay/return_p0", "env_steps", 4000) == pytest.approx(19.0)
  # a: 4,000 env steps at update 40; [3600, 4000] holds update 40 only
  assert plots.value_at(a, "selfplay/return_p0", "env_steps", 4000) == pytest.approx(4.0)
  assert plots.value_at(a, "selfplay/return_p0", "env_steps", 20000) is None  # never reached
  assert plots.value_at(a, "eval/x_score_mean", "env_steps", 10) is None  # not logged
  # The tag's last log interval empty (no episode ended): the run, not the
  # tag, says where it ends; read over the window's points. A tag that
  # stops before the window is None, not its last value carried on.
  gap = dict(
    a, **{"selfplay/return_p0": (a["selfplay/return_p0"][0][:-1], a["selfplay/return_p0"][1][:-1])}
  )
  assert plots.value_at(gap, "selfplay/return_p0", "env_steps", 10000) == pytest.approx(9.0)
  assert plots.value_at(a, "selfplay/return_p0", "env_steps", 10000) == pytest.approx(9.5)
  early = dict(
    a, **{"selfplay/return_p0": (a["selfplay/return_p0"][0][:5], a["selfplay/return_p0"][1][:5])}
  )
  assert plots.value_at(early, "selfplay/return_p0", "env_steps", 10000) is None
  # 10 minutes = update 100 for both; window [9, 10] min = updates 90..100
  assert plots.value_at(b, "selfplay/return_p0", "wall", 10.0) == pytest.approx(9.5)
  # sparse: points at 0 and 100 updates only; [9, 10] min of b holds none of them
  sparse = {k: (v[0][::10], v[1][::10]) for k, v in b.items()}
  assert plots.value_at(sparse, "selfplay/return_p0", "wall", 9.5) == pytest.approx(9.5)
  table = plots.learning_table(["runs/a", "runs/b"], [a, b])
  assert "selfplay/return_p0 at 4,000 env steps" in table
  assert "selfplay/return_p0 at 10.0 min" in table
  assert "| a | 4.000 | 9.500 |" in table and "| b | 19.000 | 9.500 |" in table


@pytest.mark.slow  # compiles several searches: minutes on a busy 2-core CPU
def test_show_search(nannon_ckpt):
  from anakin_mz.runtime import restore
  from anakin_mz.eval import search_tree

  agent = restore.load_agent(nannon_ckpt)
  out, svg = search_tree.show(agent, moves=3, simulations=6)
  assert "[0] choice P" in out and "real: decision" in out
  doc = xml.dom.minidom.parseString(svg)
  assert len(doc.getElementsByTagName("rect")) == out.count("-> [") + 1


def test_show_search_refuses_a_negative_depth(capsys):
  # It said "max() arg is an empty sequence" after a search.
  from anakin_mz.cli import show_search

  with pytest.raises(SystemExit) as e:
    show_search.main(["--checkpoint", "nannon", "--depth", "-1"], prog="anakin-mz show-search")
  assert e.value.code == 2
  err = capsys.readouterr().err
  assert err.splitlines()[-1] == (
    "anakin-mz show-search: error: --depth must be >= 0 (0 draws the root alone), got -1"
  )


def test_play_reprompts_on_bad_input(catch_ckpt, capsys):
  from anakin_mz.runtime import restore
  from anakin_mz.eval import play

  answers = iter(["left", "7", ""] + ["1"] * 20)
  agent = restore.load_agent(catch_ckpt, expect_env="catch")
  assert play.play(agent, 0, 0, None, "search", read=lambda prompt: next(answers)) == 0
  out = capsys.readouterr().out
  assert "'left' is not a move number" in out
  assert "7 is not a legal move now" in out
  assert "game over: score" in out
  assert "agent's value estimate" in out
