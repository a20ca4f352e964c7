"""The Anakin step donates the state it steps (`OnMesh.jit_step`): the run
loop's compiled step writes the new state into the old one's buffers, makes
the same run as a step that copies (`copying_step`), and a second Ctrl-C
while a step is in flight saves that step, not the deleted state."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny as tiny_lib

from anakin_mz import config as config_lib
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.experiments import profiling
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import mesh, run

# test_robustness's tiny Catch (one compiled step shared through the XLA
# cache): one Anakin step makes 4 updates.
TINY = list(tiny_lib.TINY) + [tiny_lib.FIXED_SPAN]


def tiny(*extra):
  return config_lib.load(tiny_lib.config_path("catch"), TINY + list(extra))


def _assert_trees_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_step_donates_and_makes_the_same_run_as_one_that_copies(tmp_path):
  cfg = tiny("train.total_updates=8", "train.checkpoint_every=4")
  result = run.train(cfg, logdir=str(tmp_path / "run"), progress=False)
  compiled = next(reversed(run._STEPS.values()))
  assert "input_output_alias" in compiled.as_text()  # the state's buffers are reused

  learner = Learner(cfg)
  state = learner.init_sharded(cfg.seed)
  kept = jax.tree.map(jnp.copy, state)
  copied, _ = learner.copying_step(kept)
  assert not any(x.is_deleted() for x in jax.tree.leaves(kept))  # copying keeps its input
  state, _ = learner.jit_step(state)
  _assert_trees_equal(copied, state)
  state, _ = learner.jit_step(state)  # 8 updates: two steps
  _assert_trees_equal(state.params, result.state.params)


def test_jit_step_deletes_the_state_it_is_given():
  learner = Learner(tiny("train.total_updates=8", "train.checkpoint_every=4"))
  state = learner.init_sharded(0)
  new, _ = learner.jit_step(state)
  assert all(x.is_deleted() for x in jax.tree.leaves(state.buffer))
  assert not any(x.is_deleted() for x in jax.tree.leaves(new))


class _InterruptOnce:
  """`jax` for the run module, whose `device_get` raises KeyboardInterrupt
  (a second Ctrl-C) on the `nth` step's metrics: the step is in flight, its
  input state already donated."""

  def __init__(self, nth):
    self.nth, self.seen = nth, 0

  def __getattr__(self, name):
    return getattr(jax, name)

  def device_get(self, x):
    if hasattr(x, "nonfinite_update"):
      self.seen += 1
      if self.seen == self.nth:
        raise KeyboardInterrupt
    return jax.device_get(x)


def test_a_second_ctrl_c_mid_step_saves_the_step_in_flight(tmp_path, monkeypatch, capsys):
  cfg = tiny("train.total_updates=8", "train.checkpoint_every=4")
  full = run.train(cfg, logdir=str(tmp_path / "full"), progress=False)
  monkeypatch.setattr(run, "jax", _InterruptOnce(nth=2))
  cut = run.train(cfg, logdir=str(tmp_path / "cut"), progress=False)
  assert cut.stopped_by == "SIGINT"
  assert "interrupted: saving the last complete step" in capsys.readouterr().out
  assert ckpt.steps(str(tmp_path / "cut" / "checkpoints"))[-1] == 8
  _assert_trees_equal(cut.state.params, full.state.params)


def test_time_steps_times_both_ways_and_refuses_unknown_ones():
  cfg = tiny("train.total_updates=8", "train.checkpoint_every=4")
  t = profiling.time_steps(cfg, repeats=1, warmup=1)
  assert set(t) == {"copied", "donated"} and all(v > 0 for v in t.values())
  with pytest.raises(ValueError, match="unknown ways .*valid: copied, donated"):
    profiling.time_steps(cfg, ways=("moved",))


def test_benchmark_donation_bad_input_is_a_clear_error():
  proc = tiny_lib.run_script("benchmark_donation", "--env", "nope", timeout=120)
  assert proc.returncode == 2 and "unknown env 'nope'" in proc.stderr
  assert "Traceback" not in proc.stderr
  proc = tiny_lib.run_script("benchmark_donation", "--env", "catch", "--repeats", "0", timeout=120)
  assert proc.returncode == 2 and "--repeats must be >= 1" in proc.stderr


def test_a_state_holding_one_buffer_twice_is_stepped_after_a_copy():
  # replay.init_buffer puts one zeros array in three counters: a donating
  # step refuses such a state, so jit_step (and the run loop) copy the
  # repeats first.
  learner = Learner(tiny("train.total_updates=8", "train.checkpoint_every=4"))
  state = learner.init(jax.random.PRNGKey(0))

  def pointers(s):
    return [x.unsafe_buffer_pointer() for x in jax.tree.leaves(s)]

  assert len(set(pointers(state))) < len(pointers(state))  # the aliasing guarded against
  fixed = mesh.unaliased(state)
  assert len(set(pointers(fixed))) == len(pointers(fixed))
  _assert_trees_equal(fixed, state)
  new, _ = learner.jit_step(state)  # without the copy: "donate the same buffer twice"
  assert not any(x.is_deleted() for x in jax.tree.leaves(new))
