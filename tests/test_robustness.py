"""Runs that end cleanly and survive (issue 14), on Catch with a tiny config:
the final save happens once at every boundary, SIGTERM/SIGINT save and
resume exactly, kill -9 resumes bit-identical, a NaN stops the run with the
last good checkpoint intact, and overrides take the spellings people type."""

import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest
import tiny as tiny_lib

from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz import config as config_lib
from anakin_mz.eval import periodic
from anakin_mz.runtime import run
from anakin_mz.agents.replay_learner import Learner

ROOT = os.path.join(os.path.dirname(__file__), "..")
TRAIN = os.path.join(ROOT, "scripts", "train.py")

# One Anakin step makes round(2.0 * 4 * 4 / 8) = 4 updates.
# A fixed temperature span keeps total_updates out of the compiled step, so
# every test here shares one compilation (the XLA cache), with test_anakin,
# test_seeds and test_train_cli.
TINY = list(tiny_lib.TINY) + [tiny_lib.FIXED_SPAN]
UPDATES_PER_STEP = 4
# The budget is in `run`'s key of the steps it keeps compiled (`run._STEPS`),
# so the tests share a few: 8 and 12, 100000 for every run stopped before its
# budget, 400 for the non-finite runs (this process and the CLI's).


def tiny(*extra):
  return config_lib.load(tiny_lib.config_path("catch"), TINY + list(extra))


def _params(directory, step=None):
  """The params saved at `step` (default latest) of a tiny Catch run."""
  state, meta = ckpt.restore(directory, Learner(tiny()).abstract_state(), step)
  return state.params, meta


def _assert_trees_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# ------------------------------------------------------------ final save


@pytest.mark.parametrize(
  "updates,every,expected",
  [
    (8, 4, (4, 8)),  # the last update on a checkpoint boundary
    (12, 8, (8, 12)),  # not on one
    (8, 0, (8,)),  # checkpoint_every 0: the end only
  ],
)
def test_final_save_happens_once(tmp_path, updates, every, expected):
  cfg = tiny(f"train.total_updates={updates}", f"train.checkpoint_every={every}")
  result = run.train(cfg, logdir=str(tmp_path), progress=False)
  assert result.stopped_by is None
  assert result.saved_step == updates
  assert ckpt.steps(result.checkpoint_dir) == expected


def test_an_update_budget_between_two_steps_says_where_the_run_stops(tmp_path, capsys):
  # --updates 2 runs one whole step (4 updates here): the run says so first.
  # (total_updates=8: the step test_final_save_happens_once compiled.)
  cfg = tiny("train.total_updates=8")
  result = run.train(cfg, logdir=str(tmp_path), max_updates=2, progress=False)
  assert result.saved_step == UPDATES_PER_STEP
  notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note:")]
  assert notes == [
    f"note: each step makes {UPDATES_PER_STEP} updates (a self-play chunk, then its gradient "
    f"updates), so the run stops at update {UPDATES_PER_STEP}, not 2"
  ]
  assert run.final_update(0, 8, 4) == 8 and run.final_update(4, 9, 4) == 12
  assert run.final_update(12, 8, 4) == 12  # already there: no step


def test_a_second_run_of_the_same_config_reuses_the_compiled_step(tmp_path):
  """`run.train` keeps the steps it compiled (`run._STEPS`): a run of an
  equal config makes the same run without tracing its step again, and so
  does one that differs only in the loop around the step (checkpointing);
  a config that differs in the step's own settings (the update budget)
  traces its own, even where XLA's cache then holds the same program.
  (The configs of `test_final_save_happens_once`, so that the runs here
  may be hits already.)"""
  cfg = tiny("train.total_updates=8", "train.checkpoint_every=0")
  first = run.train(cfg, logdir=str(tmp_path / "a"), progress=False)
  key = next(reversed(run._STEPS))
  compiled, kept = run._STEPS[key], len(run._STEPS)
  again = run.train(cfg, logdir=str(tmp_path / "b"), progress=False)
  assert len(run._STEPS) == kept and next(reversed(run._STEPS)) == key
  assert run._STEPS[key] is compiled
  _assert_trees_equal(again.state.params, first.state.params)
  assert [r["loss"] for r in again.history] == [r["loss"] for r in first.history]
  every4 = run.train(
    tiny("train.total_updates=8", "train.checkpoint_every=4"),
    logdir=str(tmp_path / "c"),
    progress=False,
  )
  assert len(run._STEPS) == kept and run._STEPS[key] is compiled
  _assert_trees_equal(every4.state.params, first.state.params)
  other = tiny("train.total_updates=12", "train.checkpoint_every=8")
  run.train(other, logdir=str(tmp_path / "d"), progress=False)
  assert next(reversed(run._STEPS)) != key and key in run._STEPS
  assert len(run._STEPS) <= run._STEPS_KEPT


def test_a_stop_callback_ends_the_run_after_the_step_it_names_and_saves(tmp_path):
  """`run.train(stop=...)`: asked after each step with its row, True ends
  the run there (a round of games in `compare`), checkpointed."""
  cfg = tiny("train.total_updates=100000", "train.checkpoint_every=1000")
  seen = []

  def stop(row):
    seen.append(row["update_step"])
    return len(seen) == 3

  result = run.train(cfg, logdir=str(tmp_path), progress=False, stop=stop)
  assert result.stopped_by == "stop"
  assert len(result.history) == 3 and seen == [r["update_step"] for r in result.history]
  assert result.saved_step == seen[-1] == int(result.state.update_step)
  assert ckpt.steps(result.checkpoint_dir) == (seen[-1],)


def _ticking_clock(monkeypatch):
  """`run`'s clock reads one second later at every reading, so any budget
  under a second is spent by the check after the first step, however long
  that step took (compiled here, or reused from an earlier test's run of
  the same config: `run._STEPS`)."""
  import itertools
  import types

  ticks = itertools.count()
  monkeypatch.setattr(run, "time", types.SimpleNamespace(perf_counter=lambda: float(next(ticks))))


def test_minutes_budget_stops_mid_interval_and_saves(tmp_path, monkeypatch):
  _ticking_clock(monkeypatch)
  cfg = tiny("train.total_updates=100000", "train.checkpoint_every=1000")
  # The budget is checked after each step: the run makes its first and
  # stops, between two checkpoints.
  result = run.train(cfg, logdir=str(tmp_path), max_minutes=0.5 / 60, progress=False)
  assert result.stopped_by == "minutes"
  assert result.saved_step == UPDATES_PER_STEP
  assert ckpt.steps(result.checkpoint_dir) == (UPDATES_PER_STEP,)
  # Resuming at the saved step saves nothing twice.
  again = run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=8, progress=False)
  assert ckpt.steps(again.checkpoint_dir) == (4, 8)


def test_minutes_budget_evaluates_where_it_stops(tmp_path, monkeypatch):
  """A --minutes stop between two periodic evaluations scores the state it
  reached (the untrained agent is scored at step 0 before the budget
  check)."""
  _ticking_clock(monkeypatch)
  cfg = tiny("train.total_updates=100000", "train.eval_every=1000")
  result = run.train(
    cfg,
    logdir=str(tmp_path),
    max_minutes=0.5 / 60,
    progress=False,
    evaluate=periodic.evaluate,
  )
  assert result.stopped_by == "minutes"
  assert result.saved_step == UPDATES_PER_STEP
  assert [e["update_step"] for e in result.evals] == [0, UPDATES_PER_STEP]


def test_resume_at_the_target_is_a_clean_no_op(tmp_path):
  cfg = tiny("train.total_updates=4", "train.checkpoint_every=4")
  run.train(cfg, logdir=str(tmp_path), progress=False)
  again = run.train(cfg, logdir=str(tmp_path), resume=True, progress=False)
  assert again.saved_step == 4 and again.history == []


# ------------------------------------------------------------ NaN guard


def test_nonfinite_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
  # A learning rate of 1e30 (and no effective clipping) diverges within a
  # few steps.
  cfg = tiny(
    "train.total_updates=400",
    "train.checkpoint_every=4",
    "train.learning_rate=1e30",
    "train.max_grad_norm=1e30",
  )
  with pytest.raises(run.NonFiniteError) as info:
    run.train(cfg, logdir=str(tmp_path), progress=False)
  message = str(info.value)
  assert "non-finite values at update" in message
  assert "params" in message or "loss" in message
  steps = ckpt.steps(str(tmp_path / "checkpoints"))
  for step in steps:  # everything written is finite and restorable
    params, _ = _params(str(tmp_path / "checkpoints"), step)
    assert not ckpt.nonfinite_leaves(params)
  if steps:
    assert f"last good checkpoint is step {steps[-1]}" in message
  else:
    assert "no checkpoint was written" in message


def test_learner_step_flags_nonfinite_and_does_not_apply_it():
  learner = Learner(tiny("train.learning_rate=1e30", "train.max_grad_norm=1e30"))
  state = learner.init(jax.random.PRNGKey(0))
  flagged = None
  for _ in range(50):
    kept = jax.tree.map(jax.numpy.copy, state)  # jit_step deletes the state it steps
    new_state, metrics = learner.jit_step(state)
    state = kept
    metrics = jax.device_get(metrics)
    if any(bool(v) for v in metrics["nonfinite"].values()):
      flagged = metrics
      break
    state = new_state
  assert flagged is not None, "lr 1e30 never produced a non-finite value"
  assert set(flagged["nonfinite"]) >= {"loss", "grad_norm", "value", "params"}
  assert -1 <= int(flagged["nonfinite_update"]) < learner.updates_per_chunk
  # The bad chunk was not applied: the returned params are the old ones.
  assert int(new_state.update_step) == int(state.update_step)
  _assert_trees_equal(new_state.params, state.params)
  assert not ckpt.nonfinite_leaves(jax.device_get(new_state.params))


def test_nonfinite_message_names_update_and_terms():
  metrics = {
    "nonfinite": {
      "value": np.bool_(True),
      "loss": np.bool_(True),
      "policy": np.bool_(False),
      "params": np.bool_(False),
    },
    "nonfinite_update": np.int32(2),
  }
  line = run.nonfinite_message(metrics["nonfinite"], metrics["nonfinite_update"], 100, 96, "ck")
  assert line.startswith("non-finite values at update 103: loss, value;")
  assert "last good checkpoint is step 96 in ck" in line
  metrics["nonfinite"] = {k: np.bool_(False) for k in metrics["nonfinite"]}
  flags, first = metrics["nonfinite"], metrics["nonfinite_update"]
  assert run.nonfinite_message(flags, first, 100, 96, "ck") is None


def test_nonfinite_checkpoint_is_refused(tmp_path):
  learner = Learner(tiny())
  state = jax.device_get(learner.init(jax.random.PRNGKey(0)))
  meta = ckpt.make_metadata(learner.config.to_dict(), "catch", learner.env.version, 0)
  with pytest.raises(ckpt.CheckpointError, match="refusing to save step 0"):
    ckpt.save(
      str(tmp_path / "a"),
      0,
      state.replace(params=jax.tree.map(lambda x: np.full_like(x, np.nan), state.params)),
      meta,
    )
  # A non-finite checkpoint written by other means (an older version) is
  # refused on restore, naming the bad arrays.
  leaves, treedef = jax.tree.flatten(state)
  bad = jax.tree.unflatten(
    treedef, [np.full_like(x, np.inf) if x.dtype == np.float32 else x for x in leaves]
  )
  with pytest.raises(ckpt.CheckpointError, match="non-finite values"):
    _restore_poisoned(tmp_path / "b", bad, meta, state)


def _restore_poisoned(directory, bad, meta, template):
  """Writes `bad` with orbax directly (bypassing `ckpt.save`'s guard), then
  restores it through `ckpt.restore`."""
  import orbax.checkpoint as ocp

  mngr = ocp.CheckpointManager(
    os.path.abspath(directory),
    options=ocp.CheckpointManagerOptions(create=True),
    item_names=("state", "meta"),
  )
  mngr.save(
    0, args=ocp.args.Composite(state=ocp.args.StandardSave(bad), meta=ocp.args.JsonSave(meta))
  )
  mngr.wait_until_finished()
  mngr.close()
  ckpt.restore(str(directory), template)


# ------------------------------------------------------------ corrupt and failed checkpoints


def _garble(step_dir):
  """Overwrites every data file of a saved step's state (as a bad disk would)."""
  for root, _, files in os.walk(os.path.join(step_dir, "state")):
    for name in files:
      if not name.startswith("_"):
        with open(os.path.join(root, name), "wb") as f:
          f.write(b"garbage")


def test_resume_skips_a_corrupt_latest_checkpoint_with_one_warning(tmp_path, capsys):
  cfg = tiny("train.total_updates=100000", "train.checkpoint_every=4")
  directory = str(tmp_path / "checkpoints")
  run.train(cfg, logdir=str(tmp_path), max_updates=8, progress=False)
  assert ckpt.steps(directory) == (4, 8)
  _garble(os.path.join(directory, "8"))
  capsys.readouterr()
  again = run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=12, progress=False)
  err = capsys.readouterr().err
  warnings = [line for line in err.splitlines() if "warning" in line.lower()]
  assert len(warnings) == 1, err
  assert warnings[0].startswith(f"warning: checkpoint step(s) 8 in {directory!r} cannot be read")
  assert "resuming from step 4, the newest readable one" in warnings[0]
  assert again.history[0]["update_step"] == 8  # the first step after 4
  # Step 8 is saved again; the unreadable one is kept aside, out of the steps.
  assert ckpt.steps(directory) == (4, 8, 12)
  assert os.path.isdir(os.path.join(directory, "8.unreadable"))
  # It continued exactly from step 4: the uninterrupted run's params.
  full = run.train(
    tiny("train.total_updates=100000", "train.checkpoint_every=0"),
    logdir=str(tmp_path / "full"),
    max_updates=12,
    progress=False,
  )
  _assert_trees_equal(_params(directory)[0], full.state.params)
  # With no readable step left, resuming is an error that names each one.
  for step in (4, 8, 12):
    _garble(os.path.join(directory, str(step)))
  with pytest.raises(
    ckpt.CheckpointError, match=r"no checkpoint in .* can be read: step 12: .*step 4"
  ):
    run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=16, progress=False)


def test_a_failed_save_leaves_the_earlier_checkpoints_readable(tmp_path, monkeypatch):
  import errno

  import etils.epath

  cfg = tiny("train.total_updates=100000", "train.checkpoint_every=4")
  directory = str(tmp_path / "checkpoints")
  run.train(cfg, logdir=str(tmp_path), max_updates=4, progress=False)

  # The disk fills up: the next save writes its arrays, then fails on its
  # JSON metadata, part-way through.
  def full_disk(self, *args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(etils.epath.Path, "write_text", full_disk)
  with pytest.raises(ckpt.CheckpointError) as e:
    run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=8, progress=False)
  monkeypatch.undo()
  message = str(e.value)
  assert message.startswith(f"cannot save step 8 to {directory!r}: ")
  assert "No space left on device" in message and "(steps 4 are intact)" in message
  assert ckpt.steps(directory) == (4,)
  assert os.listdir(directory) == ["4"]  # the partial step is gone
  params, meta = _params(directory)
  assert meta["step"] == 4 and not ckpt.nonfinite_leaves(params)
  # With space again, the run resumes from it and saves step 8.
  run.train(cfg, logdir=str(tmp_path), resume=True, max_updates=8, progress=False)
  assert ckpt.steps(directory) == (4, 8)


# ------------------------------------------------------------ overrides


@pytest.mark.parametrize(
  "text,key,value",
  [
    ("train.learning_rate=3e-4", "learning_rate", 3e-4),
    ("train.learning_rate=1e9", "learning_rate", 1e9),
    ("train.learning_rate=.5", "learning_rate", 0.5),
    ("train.learning_rate=2", "learning_rate", 2.0),
    ("train.total_updates=1_000", "total_updates", 1000),
    ("train.total_updates=1e3", "total_updates", 1000),
    ("train.max_grad_norm=1E+2", "max_grad_norm", 100.0),
  ],
)
def test_override_spellings(text, key, value):
  got = getattr(tiny(text).train, key)
  assert got == value and type(got) is type(value)


def test_boolean_overrides():
  assert tiny("search.dirichlet_legal_only=true").search.dirichlet_legal_only is True
  assert tiny("search.dirichlet_legal_only=false").search.dirichlet_legal_only is False


@pytest.mark.parametrize(
  "text,message",
  [
    ("train.learning_rate=nan", "train.learning_rate must be a finite number"),
    ("train.learning_rate=.inf", "train.learning_rate must be a finite number"),
    ("train.total_updates=2.5", "train.total_updates must be of type int"),
    ("train.learning_rate=fast", "train.learning_rate must be of type float"),
    ("search.dirichlet_legal_only=maybe", "dirichlet_legal_only must be of type bool"),
  ],
)
def test_bad_override_values_are_clear_errors(text, message):
  with pytest.raises(ValueError, match=message.replace(".", r"\.")):
    tiny(text)


# ------------------------------------------------------------ the CLI, in processes


def _train_cmd(logdir, *extra):
  return [
    sys.executable,
    TRAIN,
    "--env=catch",
    f"--logdir={logdir}",
    "--no-progress",
    "--devices=1",
    *TINY,
    "train.total_updates=100000",
    "train.checkpoint_every=4",
    *extra,
  ]


def _start_and_wait_for_checkpoint(logdir, *extra, after=0):
  """train.py started in `logdir` (with `extra` arguments), once it has
  saved a checkpoint past update `after`."""
  proc = subprocess.Popen(
    _train_cmd(logdir, *extra),
    cwd=ROOT,
    env=tiny_lib.cpu_env(),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )
  deadline = time.time() + 240
  while ckpt.steps(os.path.join(logdir, "checkpoints"))[-1:] <= (after,):
    if proc.poll() is not None:
      raise AssertionError(f"run ended early: {proc.stdout.read()}")
    if time.time() > deadline:
      proc.kill()
      raise AssertionError("no checkpoint within 240 s")
    time.sleep(0.2)
  return proc


def _resume(logdir, updates):
  out = subprocess.run(
    _train_cmd(logdir, "--resume", f"--updates={updates}"),
    cwd=ROOT,
    env=tiny_lib.cpu_env(),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
  "how",
  # SIGINT takes SIGTERM's path (`_StopSignals`): -m slow.
  ["SIGTERM", pytest.param("SIGINT", marks=pytest.mark.slow)],
)
def test_kill_then_stop_then_resume_is_bit_identical(tmp_path, how):
  """One chain of runs, in processes: kill -9 after a checkpoint; resumed,
  the run is stopped by `how` after its next one (it saves and exits 0);
  resumed again to 8 updates further. Its params are the uninterrupted
  run's, so both the kill's resume and the stop's are exact. (Two tests
  once, one per signal: the chain saves CI a process and a reference run.)"""
  logdir = str(tmp_path / "run")
  proc = _start_and_wait_for_checkpoint(logdir)
  proc.send_signal(signal.SIGKILL)
  proc.communicate(timeout=120)
  assert proc.returncode == -signal.SIGKILL
  killed_at = ckpt.steps(os.path.join(logdir, "checkpoints"))[-1]
  proc = _start_and_wait_for_checkpoint(logdir, "--resume", after=killed_at)
  proc.send_signal(getattr(signal, how))
  output, _ = proc.communicate(timeout=120)
  assert proc.returncode == 0, output
  assert f"stopped by {how}" in output and "Traceback" not in output, output
  stopped_at = ckpt.steps(os.path.join(logdir, "checkpoints"))[-1]
  assert stopped_at > killed_at
  target = stopped_at + 2 * UPDATES_PER_STEP
  _resume(logdir, target)
  resumed, meta = _params(os.path.join(logdir, "checkpoints"))
  assert meta["step"] == target
  # The same run, uninterrupted, in this process.
  full = run.train(
    tiny("train.total_updates=100000", "train.checkpoint_every=0"),
    logdir=str(tmp_path / "full"),
    max_updates=target,
    progress=False,
  )
  _assert_trees_equal(resumed, full.state.params)


def test_cli_nonfinite_exits_nonzero_with_one_line(tmp_path, capsys):
  # Also the CLI's overrides between options: the learning rate that makes
  # the loss non-finite is given as `--updates 400 train.learning_rate=1e30
  # --logdir ...`; were it dropped or misparsed, the run would train its 400
  # updates and exit 0. (Options after the overrides, on a run that ends
  # well: the resumes in `test_kill_then_stop_then_resume_is_bit_identical`. A test of
  # its own cost CI about 18 s for one more subprocess.) In this process
  # (`tiny.run_main`): the config of
  # `test_nonfinite_loss_stops_the_run_and_keeps_the_last_good_checkpoint`,
  # whose compiled step it reuses; the script's exit status is main's.
  from anakin_mz.cli import train as train_cli

  code = tiny_lib.run_main(
    train_cli.main,
    "--env=catch",
    "--updates",
    "400",
    "train.learning_rate=1e30",
    f"--logdir={tmp_path}",
    "--no-progress",
    "--devices=1",
    *TINY,
    "train.total_updates=400",
    "train.max_grad_norm=1e30",
    "train.checkpoint_every=4",
  )
  out = capsys.readouterr()
  assert code == 3, out.out + out.err
  assert "Traceback" not in out.err
  errors = [line for line in out.err.splitlines() if line.startswith("error:")]
  assert len(errors) == 1 and "non-finite values at update" in errors[0], out.err
