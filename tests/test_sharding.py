"""The Anakin step sharded over a mesh of forced host devices (issue 20): 1, 2
and 8 devices with the same global config give the same losses and params
to float rounding; a checkpoint saved on 2 devices resumes on 8 (and on 1,
-m slow);
the old pmap layout and a non-dividing config are clear errors; two local
processes (`jax.distributed`) train as one.

Each device count needs its own process (XLA_FLAGS before JAX starts); the
workers share the session's XLA compile cache."""

import json
import os
import shutil
import socket
import subprocess
import sys

import jax
import numpy as np
import pytest
import tiny

from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz.runtime import run
from anakin_mz.agents.replay_learner import Learner

ROOT = os.path.join(os.path.dirname(__file__), "..")

# One xdist worker runs the module (`--dist loadgroup`, pyproject.toml), so
# the 1-device reference run (`one_device`) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("sharding")

# Global sizes that divide by 1, 2 and 8 devices; one Anakin step makes
# round(2.0 * 8 * 4 / 16) = 4 updates.
TINY = [
  "network.hidden=[16,16]",
  "network.latent_dim=8",
  "network.kind=mlp",
  "search.num_simulations=3",
  "train.num_envs=8",
  "train.rollout_length=4",
  "train.replay_capacity=40",
  "train.min_replay=4",
  "train.batch_size=16",
  "train.unroll_steps=2",
  "train.replay_ratio=2.0",
  "train.eval_every=0",
  "train.log_every=1",
  "train.eval_games=4",
  "train.temperature_decay_updates=100",
  "train.total_updates=100000",
]

# argv: devices, logdir, updates, checkpoint_every, resume (0/1), out.npz.
# Prints one JSON line: the per-step losses, the device count, the steps
# saved.
WORKER = r"""
import json, os, sys
devices, logdir, updates, every, resume, out = sys.argv[1:7]
from anakin_mz.runtime import host
host.configure(int(devices))
import jax, numpy as np
import anakin_mz.agents  # registers them, as the command line does
from anakin_mz import config as config_lib
from anakin_mz.runtime import run
cfg = config_lib.load("catch",
                      sys.argv[7:] + [f"train.checkpoint_every={every}"])
result = run.train(cfg, logdir=logdir, resume=resume == "1", max_updates=int(updates),
                   progress=False)
leaves = jax.tree.leaves(jax.device_get(result.state.params))
if jax.process_index() == 0:
  np.savez(out, *leaves)
print(json.dumps({"devices": jax.device_count(), "processes": jax.process_count(),
                  "loss": [row["loss"] for row in result.history],
                  "update_step": [row["update_step"] for row in result.history],
                  "saved": result.saved_step}))
"""


def _env(**extra):
  env = tiny.cpu_env()
  env.pop("XLA_FLAGS", None)  # each worker sets its own device count
  env.update(extra)
  return env


def _worker(devices, logdir, updates, every=8, resume=False, out=None, env=None, wait=True):
  cmd = [
    sys.executable,
    "-c",
    WORKER,
    str(devices),
    str(logdir),
    str(updates),
    str(every),
    "1" if resume else "0",
    str(out or os.path.join(str(logdir), "params.npz")),
    *TINY,
  ]
  proc = subprocess.Popen(
    cmd, cwd=ROOT, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
  )
  if not wait:
    return proc
  return _result(proc)


def _result(proc):
  stdout, stderr = proc.communicate(timeout=900)
  assert proc.returncode == 0, stdout + stderr
  return json.loads(stdout.strip().splitlines()[-1])


def _params(path):
  with np.load(path) as f:
    return [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]


def _assert_params_close(a, b):
  for x, y in zip(_params(a), _params(b), strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)


@pytest.fixture(scope="module")
def one_device(tmp_path_factory):
  """An uninterrupted 1-device run of 3 steps (12 updates)."""
  logdir = tmp_path_factory.mktemp("one")
  return logdir, _worker(1, logdir, 12)


def _two_devices_then_resume_on(n, tmp_path, one_device):
  ref_dir, ref = one_device
  assert ref["devices"] == 1 and ref["update_step"] == [4, 8, 12]
  # 2 devices from scratch, saving at update 8.
  two = _worker(2, tmp_path / "two", 8)
  assert two["devices"] == 2 and two["saved"] == 8
  np.testing.assert_allclose(two["loss"], ref["loss"][:2], rtol=1e-5)
  # The 2-device checkpoint resumes on n devices.
  logdir = tmp_path / f"resume{n}"
  shutil.copytree(tmp_path / "two", logdir)
  out = _worker(n, logdir, 12, resume=True)
  assert out["devices"] == n and out["update_step"] == [12]
  np.testing.assert_allclose(out["loss"], ref["loss"][2:], rtol=1e-5)
  _assert_params_close(logdir / "params.npz", ref_dir / "params.npz")


def test_devices_give_the_same_run_and_a_checkpoint_moves_between_them(tmp_path, one_device):
  _two_devices_then_resume_on(8, tmp_path, one_device)


# Onto fewer devices: the slow suite resumes an 8-device run on 2 devices
# (tests/test_notebook.py); this one and the two-process test below are -m
# slow too (41 s of CI time for jax.distributed's two processes).
@pytest.mark.slow
def test_a_two_device_checkpoint_resumes_on_one(tmp_path, one_device):
  _two_devices_then_resume_on(1, tmp_path, one_device)


@pytest.mark.slow
def test_two_processes_train_as_one(tmp_path, one_device):
  """`jax.distributed` on CPU: two local processes with 2 devices each (a
  4-device mesh) run the 1-device run, and save one checkpoint."""
  ref_dir, ref = one_device
  with socket.socket() as s:
    s.bind(("localhost", 0))
    port = s.getsockname()[1]
  procs = [
    _worker(
      2,
      tmp_path / "multi",
      8,
      every=8,
      out=tmp_path / f"params{i}.npz",
      env=_env(
        JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
        JAX_NUM_PROCESSES="2",
        JAX_PROCESS_ID=str(i),
      ),
      wait=False,
    )
    for i in range(2)
  ]
  results = [_result(p) for p in procs]
  for out in results:
    assert out["devices"] == 4 and out["processes"] == 2, out
    np.testing.assert_allclose(out["loss"], ref["loss"][:2], rtol=1e-5)
  assert ckpt.steps(str(tmp_path / "multi" / "checkpoints")) == (8,)
  # The 4-device checkpoint restores in this 1-device process.
  learner = Learner(config_lib.load("catch", TINY))
  state, meta = ckpt.restore(str(tmp_path / "multi" / "checkpoints"), learner.abstract_state())
  assert meta["num_devices"] == 4 and int(state.update_step) == 8


COLLECTIVES = r"""
import json, re, sys
from anakin_mz.runtime import host
host.configure(2)
import anakin_mz.agents  # registers them, as the command line does
from anakin_mz import config as config_lib
from anakin_mz.core.registry import make_learner
learner = make_learner(config_lib.load("catch", sys.argv[1:]))
hlo = learner.jit_step.lower(learner.abstract_state()).compile().as_text()
kinds = "all-gather|all-to-all|collective-permute|reduce-scatter|all-reduce|collective-broadcast"
ops = re.findall(rf"= ([a-z0-9]+)\[([0-9,]*)\]\S* ({kinds})(?:-start)?\(", hlo)
print(json.dumps([[kind, [int(d) for d in dims.split(",") if d]] for _, dims, kind in ops]))
"""


@pytest.mark.parametrize("agent", ["ndmz", "tdlambda", "ppo"])
def test_two_devices_share_only_reductions(agent):
  """Each device plays, searches, stores, prepares and samples its own lanes
  (`shard_map`): the compiled 2-device step has no all-gather, all-to-all,
  permute or scatter of anything (no lane or batch row crosses devices),
  only all-reduces (the gradient and loss means, the self-play counts and
  the readiness check). The jit-sharded step before it all-gathered lane
  counts and kept the devices in lock-step."""
  proc = subprocess.run(
    [sys.executable, "-c", COLLECTIVES, *TINY, f"agent={agent}"],
    cwd=ROOT,
    env=_env(),
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  ops = json.loads(proc.stdout.strip().splitlines()[-1])
  kinds = {kind for kind, _ in ops}
  assert kinds == {"all-reduce"}, f"collectives other than all-reduce: {ops}"


def test_sizes_must_divide_over_the_devices():
  def learner(devices, *extra):
    cfg = config_lib.load("catch", TINY + list(extra))
    return Learner(cfg, mesh=type("FakeMesh", (), {"size": devices})())

  with pytest.raises(ValueError, match=r"train\.num_envs=8 does not divide over 3 devices"):
    learner(3)
  with pytest.raises(ValueError, match=r"train\.batch_size=16 does not divide over 3 devices"):
    learner(3, "train.num_envs=12")
  assert learner(1).num_devices == 1 and learner(8).num_devices == 8


def test_old_pmap_checkpoint_is_refused_on_resume(tmp_path):
  """A checkpoint of the pmap run loop (a leading device axis, `num_devices`
  in the metadata, no `state_layout`) gets one clear error naming `anakin-mz
  migrate` (tests/test_migrate.py converts one)."""
  cfg = config_lib.load("catch", TINY)
  learner = Learner(cfg)
  state = jax.tree.map(lambda x: np.asarray(x)[None], learner.init(jax.random.PRNGKey(0)))
  meta = ckpt.make_metadata(cfg.to_dict(), "catch", learner.env.version, 4)
  del meta["state_layout"]
  meta["num_devices"] = 1
  ckpt.save(str(tmp_path / "checkpoints"), 4, state, meta)
  with pytest.raises(ckpt.CheckpointError, match="older format.*anakin-mz migrate"):
    run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=8, progress=False)


def test_cli_non_dividing_devices_is_one_line_exit_2(tmp_path):
  # With the sizes global (--preset cpu); sized per device (the default) any
  # device count divides them.
  out = tiny.run_script(
    "train",
    "--env=catch",
    "--devices=3",
    "--preset=cpu",
    f"--logdir={tmp_path}",
    "--no-progress",
    *TINY,
    env=_env(),
    timeout=300,
  )
  assert out.returncode == 2, out.stdout + out.stderr
  assert "Traceback" not in out.stderr
  assert out.stderr.strip() == (
    "error: train.num_envs=8 does not divide over 3 devices: num_envs is global and is split "
    "evenly over the devices; use a multiple of 3 or another device count (train.py --devices)"
  ), out.stderr
