"""scripts/train.py: clear errors for bad input (no training is run)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
TRAIN = os.path.join(ROOT, "scripts", "train.py")


def _run(*args):
  return subprocess.run(
    [sys.executable, TRAIN, *args], capture_output=True, text=True, timeout=300, cwd=ROOT
  )


@pytest.mark.parametrize(
  "args,message",
  [
    (["--env=chess"], "unknown env 'chess'; registered envs:"),
    (["--env=catch", "train.batchsize=3"], "unknown key(s) train.batchsize"),
    (["--env=catch", "train.batch_size=-3"], "batch_size must be >= 1"),
    (["--env=catch", "search.chance_mode=guess"], "chance_mode must be one of"),
    (["--env=catch", "--config=/nonexistent.yaml"], "does not exist"),
    (["--env=catch", "--updates=0"], "--updates must be >= 1"),
    (["--env=catch", "--devices=0"], "--devices must be 'auto' or an integer >= 1"),
    (["--env=catch", "--devices=many"], "--devices must be 'auto' or an integer >= 1"),
  ],
)
def test_bad_input_is_a_clear_error(args, message):
  out = _run(*args)
  assert out.returncode == 2, out.stdout + out.stderr
  assert message in out.stderr, out.stderr


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
from anakin_mz import host
print(host.configure(sys.argv[1]))
import jax
print("count", jax.local_device_count())
try:
  host.configure(2)
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
  assert "late: cannot set 2 CPU devices: JAX has already started" in out.stdout
