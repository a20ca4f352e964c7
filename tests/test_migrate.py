"""`anakin-mz migrate` (anakin_mz/runtime/migrate.py): checkpoints and model
files of the older formats, written here as the code of those formats wrote
them, are refused by the load path with a line naming the tool, and load
after it with bit-identical params."""

import json
import os

import jax
import numpy as np
import pytest
from flax import serialization

import tiny
from anakin_mz.cli import migrate as migrate_cli
from anakin_mz.core import registry
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export, migrate
from anakin_mz.runtime import restore


def _older_config(config):
  """`config` saved in the older layouts: the discount twice (search and
  train), `train.td_lambda` in the shared section."""
  raw = config.to_dict()
  raw["search"]["discount"] = raw["train"]["discount"] = raw.pop("discount")
  raw["train"]["td_lambda"] = 0.7
  return raw


def _params(config):
  env = config.make_env()
  return env, registry.get(config.agent).model(config, env).init(jax.random.PRNGKey(3))


def _assert_same(got, want):
  jax.tree.map(
    lambda g, w: np.testing.assert_array_equal(np.asarray(g), np.asarray(w), strict=True),
    got,
    want,
  )


def test_a_pmap_checkpoint_is_refused_then_migrated_in_place(tmp_path, capsys):
  config = tiny.tiny_config("catch")
  env, params = _params(config)
  # The pmap run loop's format: a leading device axis on every array, the
  # device count in the metadata and no state_layout.
  state = {"params": params, "update_step": np.int32(5)}
  old = jax.tree.map(lambda x: np.asarray(x)[None], state)
  meta = ckpt.make_metadata(_older_config(config), env.id, env.version, 5)
  del meta["state_layout"]
  meta["num_devices"] = 1
  logdir = tmp_path / "run"
  directory = str(logdir / "checkpoints")
  ckpt.save(directory, 5, old, meta)

  with pytest.raises(ckpt.CheckpointError, match=f"`anakin-mz migrate {directory}`"):
    restore.load_agent(str(logdir))
  assert migrate_cli.main([str(logdir)]) == 0  # the run's logdir: its checkpoints
  out = capsys.readouterr().out
  assert "pmap run loop" in out and "td_lambda" in out and "discount" in out
  assert os.path.isdir(directory + migrate.KEPT_SUFFIX)  # the original, kept
  agent = restore.load_agent(str(logdir))
  _assert_same(agent.params, params)
  assert agent.config == config and agent.step == 5
  saved = ckpt.load_metadata(directory)
  assert saved["state_layout"] == ckpt.STATE_LAYOUT and "pmap" in saved["migrated_from"]
  assert int(ckpt.read_saved(directory, 5)["update_step"]) == 5
  assert migrate_cli.main([directory, "--out", str(tmp_path / "again")]) == 0
  assert "today's format already" in capsys.readouterr().out
  assert not os.path.exists(tmp_path / "again")
  assert migrate_cli.main([directory]) == 0  # a second migration finds nothing to do
  assert "today's format already" in capsys.readouterr().out


def test_an_older_model_file_is_refused_then_migrated_to_a_new_path(tmp_path, capsys):
  config = tiny.tiny_config("catch")
  env, params = _params(config)
  path = str(tmp_path / "old.msgpack")
  export.write(path, config, params, 9, env.id, env.version)
  with open(path, "rb") as f:  # as written before agent_kind and today's config layout
    doc = serialization.msgpack_restore(f.read())
  del doc["agent_kind"]
  doc["config"] = json.dumps(_older_config(config), sort_keys=True)
  with open(path, "wb") as f:
    f.write(serialization.msgpack_serialize(doc))
  with open(path, "rb") as f:
    original = f.read()

  with pytest.raises(ckpt.CheckpointError, match=f"no agent_kind.*`anakin-mz migrate {path}`"):
    restore.load_agent(path)
  new = str(tmp_path / "new.msgpack")
  assert migrate_cli.main([path, "--out", new]) == 0
  assert "agent_kind search added" in capsys.readouterr().out
  with open(path, "rb") as f:
    assert f.read() == original  # --out leaves the original as it was
  agent = restore.load_agent(new)
  _assert_same(agent.params, params)
  assert (agent.config, agent.step, agent.agent_kind) == (config, 9, "search")

  doc["agent_kind"] = "search"  # the config's layout alone is older
  with open(path, "wb") as f:
    f.write(serialization.msgpack_serialize(doc))
  with pytest.raises(ckpt.CheckpointError, match="td_lambda moved.*anakin-mz migrate"):
    export.read(path)


def test_bad_input_is_one_line_exit_2(tmp_path, capsys):
  assert migrate_cli.main([str(tmp_path / "nope")]) == 2
  err = capsys.readouterr().err
  assert err.startswith("error: ") and "neither a checkpoint directory nor a model file" in err
  assert len(err.strip().splitlines()) == 1
  assert migrate_cli.main(["nannon"]) == 2  # a shipped model's name
  assert "shipped models are in today's format" in capsys.readouterr().err
  assert migrate_cli.main([str(tmp_path), "--out", str(tmp_path)]) == 2
  assert "exists; migrate writes a new path" in capsys.readouterr().err
