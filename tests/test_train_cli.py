"""scripts/train.py (`anakin-mz train`): clear errors for bad input (no
training is run), and an adapted game trains from the generic config of its
kind, its budget given in the overrides' number spellings."""

import json
import os
import subprocess
import sys

import jax
import pytest
import tiny

import envs
from anakin_mz.eval import plots
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _run(*args, cwd=None, timeout=300):
  """train.py in a fresh process on the CPU (the test session's XLA cache:
  conftest), from `cwd` (default the checkout's root)."""
  return tiny.run_script("train", *args, timeout=timeout, env=tiny.cpu_env(), cwd=cwd)


def _main(capsys, *args):
  """`anakin-mz train ARGS` in this process (`tiny.run_main`; about 1.8 s
  less each than a fresh one): its exit code, stdout and stderr.
  `--devices=1` is added where ARGS give none (`auto` would ask for one
  device per core). The script's own process:
  `test_a_bad_input_exits_2_from_the_script`, and test_robustness's runs."""
  from anakin_mz.cli import train as train_cli

  if not any(a.startswith("--devices") for a in args):
    args = (*args, "--devices=1")
  code = tiny.run_main(train_cli.main, *args)
  out = capsys.readouterr()
  return code, out.out, out.err


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
    (["--env=catch", "--seeds", "0", "0"], "train.seeds must be distinct integers >= 0"),
    (["--env=catch", "--seeds", "3", "-1"], "got [3, -1]"),
    (["--env=catch", "--seed=1", "--seeds", "0", "1"], "--seed and --seeds: give one"),
    (
      ["--env=catch", "--resume", "--logdir=/nonexistent/runs/ctach"],
      "error: --resume: no checkpoint in '/nonexistent/runs/ctach/checkpoints' to continue "
      "(is --logdir right?); --resume-if-present starts a new run where there is none",
    ),
    (
      ["--env=catch", "--resume", "--logdir="],
      "error: --logdir is empty: give a directory, or leave --logdir out for runs/<env>",
    ),
    (["--env=catch", "--logdir", " "], "error: --logdir is empty"),
  ],
)
def test_bad_input_is_a_clear_error(args, message, capsys):
  code, out, err = _main(capsys, *args)
  assert code == 2, out + err
  assert message in err, err
  assert "Traceback" not in err


def test_a_bad_input_exits_2_from_the_script():
  # The cases above run in this process; one through the script, as a user
  # runs it (exit status 2, one message, no traceback).
  out = _run("--env=catch", "train.batchsize=3")
  assert out.returncode == 2, out.stdout + out.stderr
  assert "unknown key(s) train.batchsize" in out.stderr, out.stderr
  assert "Traceback" not in out.stderr


def test_an_adapted_game_trains_from_its_kinds_config(tmp_path, capsys, monkeypatch):
  # pgx-tic_tac_toe has no config file: the generic two-player planes one (a
  # conv torso) with the tiny sizes; run from outside the checkout, the
  # budget spelled as overrides may be (1e1 updates: 3 Anakin steps of 4).
  tiny_sizes = [o for o in tiny.TINY if not o.startswith("network.kind")]
  monkeypatch.chdir(tmp_path)
  code, out, err = _main(
    capsys,
    "--env=pgx-tic_tac_toe",
    "--updates=1e1",
    "--minutes=.5e1",
    f"--logdir={tmp_path / 'run'}",
    "--no-progress",
    "--devices=1",
    *tiny_sizes,
    "network.conv_channels=[4]",
  )
  assert code == 0, out + err
  directory = str(tmp_path / "run" / "checkpoints")
  assert ckpt.steps(directory) == (12,)
  config = ckpt.load_metadata(directory)["config"]
  assert config["env"]["name"] == "pgx-tic_tac_toe" and config["network"]["kind"] == "conv"
  assert config["search"]["dirichlet_legal_only"] is True  # the two-player base's


def test_resume_if_present_starts_a_new_run_where_there_is_none(tmp_path, capsys):
  logdir = tmp_path / "run"
  common = ["--env=catch", f"--logdir={logdir}", "--no-progress", "--devices=1", *tiny.TINY]
  common.append(tiny.FIXED_SPAN)  # the Catch step test_robustness compiles
  code, out, err = _main(capsys, *common, "--updates=4", "--resume-if-present")
  assert code == 0, out + err
  assert ckpt.steps(str(logdir / "checkpoints")) == (4,)


def test_an_unwritable_json_is_an_error_before_training(tmp_path, capsys):
  blocker = tmp_path / "file"
  blocker.write_text("x")
  code, out, err = _main(
    capsys, "--env=catch", f"--logdir={tmp_path / 'run'}", f"--json={blocker / 't.json'}"
  )
  assert code == 2, out + err
  assert f"cannot write --json '{blocker / 't.json'}': '{blocker}' is not a writable" in err
  assert not (tmp_path / "run").exists()


def test_evaluations_print_a_short_line_each_and_the_run_a_short_table(tmp_path, capsys):
  # Each evaluation used to print one line of every metric (~880 characters
  # on Nannon) and the run a JSON dump of the last (49 lines): now a short
  # line and a table, every metric in TensorBoard and --json.
  logdir, out_json = tmp_path / "run", tmp_path / "train.json"
  common = ["--env=catch", f"--logdir={logdir}", "--no-progress", "--devices=1", *tiny.TINY]
  common.append(tiny.FIXED_SPAN)  # the Catch step test_robustness compiles
  code, out, err = _main(capsys, *common, "--updates=4", "train.eval_every=4", f"--json={out_json}")
  assert code == 0, out + err
  lines = out.splitlines()
  evals = [line for line in lines if line.startswith("[eval]")]
  assert [line.split("  ")[0] for line in evals] == ["[eval] update 0", "[eval] update 4"]
  assert evals[0].startswith("[eval] update 0  env steps 0  wall ") and " score " in evals[0]
  assert all(len(line) < 100 for line in evals), evals
  table = lines[lines.index(next(x for x in lines if x.startswith("final evaluation:"))) :]
  assert table[0].startswith("final evaluation: update 4, ")
  assert table[1].split() == ["eval/vs_random_score_mean", table[1].split()[1]]
  assert f"more metrics in TensorBoard ({logdir}) and {out_json})" in table[2], table
  assert len(lines) < 15 and "{" not in out, out
  saved = json.loads(out_json.read_text())
  assert [e["update_step"] for e in saved["evaluations"]] == [0, 4]
  assert saved["update_step"] == saved["saved_step"] == 4 and saved["stopped_by"] is None
  assert {"eval/vs_random_draw_rate", "eval/vs_random_mean_length"} <= set(saved["evaluations"][1])
  # The x axes are logged at each evaluation: the untrained one at 0 env steps.
  scalars = plots.load_scalars(str(logdir))
  steps, env_steps = scalars["train/env_steps"]
  assert (steps[0], env_steps[0]) == (0, 0.0)
  assert scalars["train/wall_s"][0][0] == 0 and scalars["train/wall_s"][1][0] > 0


@pytest.mark.slow  # a compilation per game: minutes on a 2-core CPU
@pytest.mark.parametrize("name", [n for n in envs.registered() if n not in config_lib.shipped()])
def test_every_game_without_a_config_trains_from_its_kinds(name, tmp_path):
  from anakin_mz.runtime import run

  tiny_sizes = [o for o in tiny.TINY if not o.startswith("network.kind")]
  cfg, _, _ = config_lib.load_for_env(name, None, tiny_sizes + ["network.conv_channels=[4]"])
  result = run.train(cfg, logdir=str(tmp_path), max_updates=1, progress=False)
  assert result.saved_step == int(result.state.update_step) >= 1


def test_resume_reads_the_sizes_of_the_newest_readable_checkpoint(tmp_path):
  from anakin_mz.cli import train as train_cli

  logdir = tmp_path / "run"
  directory = str(logdir / "checkpoints")
  dirs = [str(tmp_path / "other"), directory]  # the first with a checkpoint (a study's seeds)
  assert train_cli._saved_lanes(dirs) is None  # nothing saved: a fresh start
  for step, lanes in ((4, 8), (8, 12)):
    cfg = tiny.tiny_config("catch", f"train.num_envs={lanes}", f"train.batch_size={2 * lanes}")
    meta = ckpt.make_metadata(cfg.to_dict(), "catch", 1, step)
    ckpt.save(directory, step, {"x": jax.numpy.zeros(2)}, meta)
  assert train_cli._saved_lanes(dirs) == 12
  # A newest step whose metadata does not read gives way to the one before,
  # as run.train's restore does.
  for f in (logdir / "checkpoints" / "8" / "meta").rglob("*"):
    if f.is_file():
      f.write_text("{ not json")
  assert train_cli._saved_lanes(dirs) == 8


@pytest.mark.slow  # two compilations: about 70 s on a 2-core CPU
def test_sizes_are_per_device_and_a_resume_keeps_the_checkpoints(tmp_path):
  # Two devices, the default preset: each device the config's 4 lanes and
  # batch 8, so 8 lanes and batch 16 in all; resumed on one device, the run
  # keeps them (its config must match the checkpoint's).
  logdir = str(tmp_path / "run")
  common = ["--env=catch", f"--logdir={logdir}", "--no-progress", *tiny.TINY]
  common.append("train.checkpoint_every=4")
  out = _run(*common, "--devices=2", "--updates=4")
  assert out.returncode == 0, out.stdout + out.stderr
  assert "sizes (--preset per-device): 8 lanes, batch 16" in out.stdout, out.stdout
  train = ckpt.load_metadata(os.path.join(logdir, "checkpoints"))["config"]["train"]
  assert (train["num_envs"], train["batch_size"]) == (8, 16)
  out = _run(*common, "--devices=1", "--resume", "--updates=8")
  assert out.returncode == 0, out.stdout + out.stderr
  assert "sizes (the checkpoint's): 8 lanes, batch 16" in out.stdout, out.stdout
  assert ckpt.steps(os.path.join(logdir, "checkpoints"))[-1] == 8


def test_unwritable_logdir(tmp_path, capsys):
  if os.geteuid() == 0:
    # root can write anywhere: use a path under a regular file instead.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    logdir = str(blocker / "sub")
  else:
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    logdir = str(ro / "sub")
  code, out, err = _main(capsys, "--env=catch", f"--logdir={logdir}", "--no-progress")
  assert code == 2, out + err
  assert "logdir" in err and logdir in err


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
    env=tiny.cpu_env(),
  )
  assert out.returncode == 0, out.stderr
  expected = count or len(os.sched_getaffinity(0))
  assert f"count {expected}" in out.stdout, out.stdout
  assert f"{expected} CPU device(s)" in out.stdout
  assert f"late: cannot set {expected + 1} CPU devices: JAX has already started" in out.stdout


def test_more_devices_than_cores_says_what_it_does():
  # --devices 3 on one usable core: three devices sharing it, said as such
  # (the line used to end "(--devices auto: one per core)").
  core = min(os.sched_getaffinity(0))
  out = subprocess.run(
    [sys.executable, "-c", HOST_DEVICES, "3"],
    capture_output=True,
    text=True,
    timeout=120,
    cwd=ROOT,
    env=tiny.cpu_env(),
    preexec_fn=lambda: os.sched_setaffinity(0, {core}),
  )
  assert out.returncode == 0, out.stderr
  assert out.stdout.splitlines()[0] == (
    "3 CPU device(s) on 1 usable core(s) (--devices 3: more devices than usable cores, "
    "so they share them; --devices auto, one per core, was the fastest measured)"
  )


def test_several_cpu_devices_run_one_thread_each_unless_the_user_says(monkeypatch):
  from anakin_mz.runtime import host

  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
  host._one_thread_per_device()
  assert os.environ["XLA_FLAGS"].split() == [
    "--xla_cpu_enable_fast_math=false",
    "--xla_cpu_multi_thread_eigen=false",
  ]
  monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")
  host._one_thread_per_device()
  assert os.environ["XLA_FLAGS"] == "--xla_cpu_multi_thread_eigen=true"
