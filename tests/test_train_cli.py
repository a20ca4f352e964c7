"""scripts/train.py (`anakin-mz train`): clear errors for bad input (no
training is run), and an adapted game trains from the generic config of its
kind, its budget given in the overrides' number spellings."""

import os
import subprocess
import sys

import jax
import pytest
import tiny

import envs
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib

ROOT = os.path.join(os.path.dirname(__file__), "..")
TRAIN = os.path.join(ROOT, "scripts", "train.py")


def _run(*args, cwd=ROOT, timeout=300):
  env = dict(  # the test session's XLA compile cache
    os.environ,
    JAX_PLATFORMS="cpu",
    JAX_COMPILATION_CACHE_DIR=jax.config.jax_compilation_cache_dir,
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="1",
    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
  )
  return subprocess.run(
    [sys.executable, TRAIN, *args],
    capture_output=True,
    text=True,
    timeout=timeout,
    cwd=cwd,
    env=env,
  )


@pytest.mark.parametrize(
  "args,message",
  [
    (["--env=chess"], "unknown env 'chess'; registered envs:"),
    (["--env=catch", "train.batchsize=3"], "unknown key(s) train.batchsize"),
    (["--env=catch", "train.batch_size=-3"], "batch_size must be >= 1"),
    (["--env=catch", "search.chance_mode=guess"], "chance_mode must be one of"),
    (["--env=nannon", "search.tree=papr"], "tree must be one of ('ndmz', 'paper'), got 'papr'"),
    (["--env=catch", "--config=/nonexistent.yaml"], "does not exist"),
    (["--env=catch", "--config=nosuch"], "shipped configs: breakthrough, carchess, catch,"),
    (["--env=catch", "--config=nannon"], "--env=catch but config 'nannon' is for env 'nannon'"),
    (["--env=catch", "--updates=0"], "--updates must be >= 1"),
    (["--env=catch", "--updates=0e3"], "--updates must be >= 1"),
    (["--env=catch", "--updates=2.5"], "argument --updates: not an integer: '2.5'"),
    (["--env=catch", "--minutes=soon"], "argument --minutes: not a finite number: 'soon'"),
    (["--env=catch", "--minutes=-.5"], "--minutes must be > 0"),
    (["--env=catch", "--devices=0"], "--devices must be 'auto' or an integer >= 1"),
    (["--env=catch", "--devices=many"], "--devices must be 'auto' or an integer >= 1"),
  ],
)
def test_bad_input_is_a_clear_error(args, message):
  out = _run(*args)
  assert out.returncode == 2, out.stdout + out.stderr
  assert message in out.stderr, out.stderr
  assert "Traceback" not in out.stderr


def test_an_adapted_game_trains_from_its_kinds_config(tmp_path):
  # pgx-tic_tac_toe has no config file: the generic two-player planes one (a
  # conv torso) with the tiny sizes; run from outside the checkout, the
  # budget spelled as overrides may be (1e1 updates: 3 Anakin steps of 4).
  tiny_sizes = [o for o in tiny.TINY if not o.startswith("network.kind")]
  out = _run(
    "--env=pgx-tic_tac_toe",
    "--updates=1e1",
    "--minutes=.5e1",
    f"--logdir={tmp_path / 'run'}",
    "--no-progress",
    "--devices=1",
    *tiny_sizes,
    "network.conv_channels=[4]",
    cwd=tmp_path,
    timeout=600,
  )
  assert out.returncode == 0, out.stdout + out.stderr
  directory = str(tmp_path / "run" / "checkpoints")
  assert ckpt.steps(directory) == (12,)
  config = ckpt.load_metadata(directory)["config"]
  assert config["env"]["name"] == "pgx-tic_tac_toe" and config["network"]["kind"] == "conv"
  assert config["search"]["dirichlet_legal_only"] is True  # the two-player base's


@pytest.mark.slow  # a compilation per game: minutes on a 2-core CPU
@pytest.mark.parametrize("name", [n for n in envs.registered() if n not in config_lib.shipped()])
def test_every_game_without_a_config_trains_from_its_kinds(name, tmp_path):
  from anakin_mz.runtime import run

  tiny_sizes = [o for o in tiny.TINY if not o.startswith("network.kind")]
  cfg, _, _ = config_lib.load_for_env(name, None, tiny_sizes + ["network.conv_channels=[4]"])
  result = run.train(cfg, logdir=str(tmp_path), max_updates=1, progress=False)
  assert result.saved_step == int(result.state.update_step) >= 1


def test_unwritable_logdir(tmp_path):
  if os.geteuid() == 0:
    # root can write anywhere: use a path under a regular file instead.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    logdir = str(blocker / "sub")
  else:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    logdir = str(ro / "sub")
  out = _run("--env=catch", f"--logdir={logdir}", "--no-progress")
  assert out.returncode == 2, out.stdout + out.stderr
  assert "logdir" in out.stderr and logdir in out.stderr


HOST_DEVICES = r"""
import sys
from anakin_mz.runtime import host
print(host.configure(sys.argv[1]))
import jax
print("count", jax.local_device_count())
try:
  host.configure(jax.local_device_count() + 1)  # another count, once JAX started
except ValueError as e:
  print("late:", e)
"""


@pytest.mark.parametrize("devices,count", [("auto", None), ("3", 3)])
def test_host_devices(devices, count):
  # auto: one device per usable core (the fastest measured on CPU).
  out = subprocess.run(
    [sys.executable, "-c", HOST_DEVICES, devices],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
    env=dict(os.environ, JAX_PLATFORMS="cpu"),
  )
  assert out.returncode == 0, out.stderr
  expected = count or len(os.sched_getaffinity(0))
  assert f"count {expected}" in out.stdout, out.stdout
  assert f"{expected} CPU device(s)" in out.stdout
  assert f"late: cannot set {expected + 1} CPU devices: JAX has already started" in out.stdout
