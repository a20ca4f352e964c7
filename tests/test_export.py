"""Params-only model files (anakin_mz.runtime.export): a checkpoint exports to a file
that restores the same params and scores the same; bad files are named; the
shipped Nannon model is small, found by name and at the default's strength."""

import os

import jax
import msgpack
import numpy as np
import pytest
import tiny as tiny_lib

import envs
import envs.bots
from anakin_mz.runtime import export, run
from anakin_mz.runtime import restore
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz.cli import export as export_cli
from anakin_mz.cli import main as cli_main
from anakin_mz.eval import report


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
  """A tiny Catch run with one checkpoint, and its exported model file."""
  logdir = tmp_path_factory.mktemp("catch")
  # tiny.FIXED_SPAN: the Catch step test_anakin and test_robustness compile.
  cfg = config_lib.load(
    tiny_lib.config_path("catch"),
    list(tiny_lib.TINY) + [tiny_lib.FIXED_SPAN, "train.total_updates=4"],
  )
  result = run.train(cfg, logdir=str(logdir), progress=False)
  model = str(logdir / "catch.msgpack")
  assert export_cli.main(["--checkpoint", result.checkpoint_dir, "--out", model]) == 0
  return result.checkpoint_dir, model


def test_a_model_file_restores_the_checkpoints_params_exactly(catch_run):
  directory, model = catch_run
  from_dir = restore.load_agent(directory)
  from_file = restore.load_agent(model, expect_env="catch")
  assert from_file.step == from_dir.step and from_file.config == from_dir.config
  leaves_dir, tree_dir = jax.tree.flatten(from_dir.params)
  leaves_file, tree_file = jax.tree.flatten(from_file.params)
  assert tree_dir == tree_file
  for a, b in zip(leaves_dir, leaves_file):
    assert a.dtype == b.dtype
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # No replay buffer, no optimizer state: the file is the params and a header.
  n_bytes = sum(np.asarray(x).nbytes for x in leaves_dir)
  assert n_bytes < os.path.getsize(model) < n_bytes + 16_000


def test_a_model_file_scores_as_its_checkpoint(catch_run):
  directory, model = catch_run
  a = report.evaluate_checkpoint(directory, games=20, seed=3)
  b = report.evaluate_checkpoint(model, games=20, seed=3)
  for k in ("checkpoint", "wall_s"):
    a.pop(k), b.pop(k)
  assert a == b


def _write(path, doc):
  with open(path, "wb") as f:
    f.write(msgpack.packb(doc))


def test_bad_model_files_are_named(catch_run, tmp_path):
  _, model = catch_run
  garbage = tmp_path / "garbage.msgpack"
  garbage.write_bytes(b"\xc1\xc1 not msgpack")
  with pytest.raises(ckpt.CheckpointError, match="not an anakin-mz model file"):
    restore.load_agent(str(garbage))
  other = tmp_path / "other.msgpack"
  _write(other, {"format": "something-else/3"})
  with pytest.raises(ckpt.CheckpointError, match="format 'something-else/3'"):
    restore.load_agent(str(other))
  partial = tmp_path / "partial.msgpack"
  _write(partial, {"format": export.FORMAT, "env": "catch"})
  with pytest.raises(ckpt.CheckpointError, match="lacks config, env_version, step, params"):
    restore.load_agent(str(partial))
  with pytest.raises(ckpt.CheckpointError, match="is for env 'catch', not 'nannon'"):
    restore.load_agent(model, expect_env="nannon")
  with pytest.raises(ckpt.CheckpointError, match="holds step 4 only; drop --step 8"):
    restore.load_agent(model, step=8)


def test_params_that_do_not_fit_the_network_are_named(catch_run, tmp_path):
  _, model = catch_run
  m = export.read(model)
  params = jax.tree.map(np.asarray, m.params)
  first = sorted(params)[0]
  layer = sorted(params[first]["params"])[0]
  bias = params[first]["params"][layer]["bias"]
  params[first]["params"][layer]["bias"] = np.zeros(bias.shape[0] + 1, np.float32)
  bad = tmp_path / "bad.msgpack"
  export.write(str(bad), m.config, params, m.step, m.env_id, m.env_version)
  with pytest.raises(ckpt.CheckpointError, match=f"{first}/params/{layer}/bias has shape"):
    restore.load_agent(str(bad))


def test_nonfinite_params_are_not_exported(catch_run, tmp_path):
  _, model = catch_run
  m = export.read(model)
  params = jax.tree.map(lambda x: np.full_like(np.asarray(x), np.nan), m.params)
  with pytest.raises(ValueError, match="non-finite"):
    export.write(str(tmp_path / "nan.msgpack"), m.config, params, 1, m.env_id, m.env_version)
  assert not (tmp_path / "nan.msgpack").exists()


def test_the_export_command_fails_cleanly(tmp_path, capsys):
  assert cli_main(["export", "--checkpoint", str(tmp_path / "none"), "--out", "m.msgpack"]) == 2
  assert "error:" in capsys.readouterr().err
  with pytest.raises(SystemExit) as e:
    export_cli.main(["--checkpoint", str(tmp_path), "--out", "model.bin"])
  assert e.value.code == 2
  assert "a model file ends in .msgpack" in capsys.readouterr().err


def test_the_shipped_nannon_model_is_small_and_plays_near_optimal():
  """The README's first game: the shipped model, found by name, at most
  2 MB, and its greedy head scores >= 0.48 exact against the optimal player
  (the default config's 15-minute strength, 0.49)."""
  path = export.resolve("nannon")
  assert path == export.shipped_path("nannon") and os.path.isfile(path)
  assert os.path.getsize(path) <= 2_000_000
  agent = restore.load_agent("nannon", expect_env="nannon")
  assert agent.env.id == "nannon"
  assert {k: agent.env.params[k] for k in ("points", "checkers", "die_sides")} == {
    "points": 6,
    "checkers": 3,
    "die_sides": 6,
  }
  (evaluator,) = envs.bots.evaluators("nannon")
  policy = agent.greedy_policy()
  scores = evaluator.score(agent.env, {"greedy": policy}, jax.random.PRNGKey(0))
  assert scores["greedy_vs_optimal"] >= 0.48, scores


# The search the shipped Nannon model plays (docs/results/models.md): measured
# exact on this very model in docs/results/records/planning.jsonl (variant
# expectation_gumbel16, model shipped: 0.4941 against the optimal player).
SHIPPED_NANNON_SEARCH = {
  "num_simulations": 16,
  "value_bounds": (-1.0, 1.0),
  "chance_mode": "prior_minus_visits",
  "chance_value": "expected",
  "root": "gumbel",
  "backup": "expectation",
}


def _export(catch_run, tmp_path, *extra):
  directory, _ = catch_run
  out = str(tmp_path / "m.msgpack")
  assert export_cli.main(["--checkpoint", directory, "--out", out, *extra]) == 0
  return out


def test_export_writes_the_play_settings_and_evaluate_reads_them(catch_run, tmp_path):
  out = _export(
    catch_run,
    tmp_path,
    "--search",
    "num_simulations=3",
    "--search",
    "root=gumbel",
    "--player",
    "greedy",
  )
  m = export.read(out)
  # The file's play settings are its playing search; self-play's stays as trained.
  playing = m.config.playing_search
  assert (playing.num_simulations, playing.root, m.agent_kind) == (3, "gumbel", "greedy")
  assert m.config.search == restore.load_agent(catch_run[0]).config.search
  assert restore.load_agent(out).agent_kind == "greedy"
  # evaluate plays the file's player with the file's search unless told otherwise
  r = report.evaluate_checkpoint(out, games=2, extra=False)
  assert r["agent"] == "greedy" and "search_overrides" not in r
  r = report.evaluate_checkpoint(out, games=2, extra=False, agent_kind="search")
  assert (r["agent"], r["simulations"]) == ("search", 3)
  # a checkpoint (no file) plays the search, as before
  assert report.evaluate_checkpoint(catch_run[0], games=2, extra=False)["agent"] == "search"
  # re-exporting a model file keeps its settings unless changed
  again = str(tmp_path / "again.msgpack")
  assert (
    export_cli.main(["--checkpoint", out, "--out", again, "--search", "backup=expectation"]) == 0
  )
  m2 = export.read(again)
  assert (m2.config.playing_search.root, m2.config.playing_search.backup, m2.agent_kind) == (
    "gumbel",
    "expectation",
    "greedy",
  )
  assert m2.step == m.step
  for a, b in zip(jax.tree.leaves(m.params), jax.tree.leaves(m2.params)):
    np.testing.assert_array_equal(a, b)


def test_play_reads_the_files_settings_and_takes_search(catch_run, tmp_path, monkeypatch):
  from anakin_mz.cli import play as play_cli
  from anakin_mz.eval import play

  out = _export(catch_run, tmp_path, "--search", "root=gumbel", "--player", "greedy")
  seen = []
  monkeypatch.setattr(
    play, "play", lambda agent, seat, seed, sims, kind, read: seen.append((agent, kind)) or 0
  )
  assert play_cli.main(["--env", "catch", "--checkpoint", out]) == 0
  agent, kind = seen[-1]
  assert (agent.config.playing_search.root, kind) == ("gumbel", "greedy")
  argv = [
    "--env",
    "catch",
    "--checkpoint",
    out,
    "--search",
    "num_simulations=5",
    "--player",
    "search",
  ]
  assert play_cli.main(argv) == 0
  agent, kind = seen[-1]
  playing = agent.config.playing_search
  assert (playing.root, playing.num_simulations, kind) == ("gumbel", 5, "search")


@pytest.mark.parametrize("tool", ["export", "play"])
@pytest.mark.parametrize("item", ["bogus=1", "root=nope", "noequals", "num_simulations=0"])
def test_a_bad_search_setting_is_one_line_and_exit_2(catch_run, tmp_path, capsys, tool, item):
  _, model = catch_run
  out = tmp_path / "bad.msgpack"
  if tool == "export":
    argv = ["export", "--checkpoint", model, "--out", str(out), "--search", item]
  else:
    argv = ["play", "--env", "catch", "--checkpoint", model, "--search", item]
  assert cli_main(argv) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("error:") and "\n" not in err, err
  assert not out.exists()


def test_the_shipped_nannon_model_carries_its_scored_search():
  """The shipped file plays the search that was scored on it by default
  (models.md): no --search needed for evaluate, play, show-search."""
  m = export.read(export.shipped_path("nannon"))
  search = m.config.search
  assert {k: getattr(search, k) for k in SHIPPED_NANNON_SEARCH} == SHIPPED_NANNON_SEARCH
  assert m.agent_kind == "search" and m.step == 26208


@pytest.mark.slow
def test_the_shipped_nannon_search_plays_near_optimal():
  """The shipped model's default search (16 simulations) scores >= 0.49
  exact against the optimal player (0.4941 measured; a search for each
  decision state: minutes on one core)."""
  agent = restore.load_agent("nannon", expect_env="nannon")
  (evaluator,) = envs.bots.evaluators("nannon")
  scores = evaluator.score(agent.env, {"search": agent.search_policy()}, jax.random.PRNGKey(0))
  assert scores["search_vs_optimal"] >= 0.49, scores
