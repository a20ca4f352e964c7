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
from anakin_mz.runtime import restore as agent_lib
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz.cli import export as export_cli
from anakin_mz.cli import main as cli_main
from anakin_mz.eval import report


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
  """A tiny Catch run with one checkpoint, and its exported model file."""
  logdir = tmp_path_factory.mktemp("catch")
  cfg = config_lib.load(
    tiny_lib.config_path("catch"), list(tiny_lib.TINY) + ["train.total_updates=4"]
  )
  result = run.train(cfg, logdir=str(logdir), progress=False)
  model = str(logdir / "catch.msgpack")
  assert export_cli.main(["--checkpoint", result.checkpoint_dir, "--out", model]) == 0
  return result.checkpoint_dir, model


def test_a_model_file_restores_the_checkpoints_params_exactly(catch_run):
  directory, model = catch_run
  from_dir = agent_lib.load_agent(directory)
  from_file = agent_lib.load_agent(model, expect_env="catch")
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
    agent_lib.load_agent(str(garbage))
  other = tmp_path / "other.msgpack"
  _write(other, {"format": "something-else/3"})
  with pytest.raises(ckpt.CheckpointError, match="format 'something-else/3'"):
    agent_lib.load_agent(str(other))
  partial = tmp_path / "partial.msgpack"
  _write(partial, {"format": export.FORMAT, "env": "catch"})
  with pytest.raises(ckpt.CheckpointError, match="lacks config, env_version, step, params"):
    agent_lib.load_agent(str(partial))
  with pytest.raises(ckpt.CheckpointError, match="is for env 'catch', not 'nannon'"):
    agent_lib.load_agent(model, expect_env="nannon")
  with pytest.raises(ckpt.CheckpointError, match="holds step 4 only; drop --step 8"):
    agent_lib.load_agent(model, step=8)


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
    agent_lib.load_agent(str(bad))


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
  agent = agent_lib.load_agent("nannon", expect_env="nannon")
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
