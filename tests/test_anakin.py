"""The Anakin loop on tiny configs: every game runs, checkpoints round-trip,
resume equals an uninterrupted run (several devices: tests/test_sharding.py)."""

import os

import jax
import numpy as np
import pytest
import tiny as tiny_lib

import envs
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import run
from anakin_mz.agents.replay_learner import Learner

ROOT = os.path.join(os.path.dirname(__file__), "..")


# The step each test here compiles is one another module compiles too, so
# that the session's XLA cache (conftest.py) compiles it once: Nannon's as
# test_registry, test_key_flavours, test_threefry and test_scaling build it
# (tiny.TINY alone), Catch's as test_robustness, test_seeds and
# test_train_cli do (tiny.FIXED_SPAN).
_SHARED = {"catch": (tiny_lib.FIXED_SPAN,)}


def tiny_config(name, extra=()):
  return tiny_lib.tiny_config(name, "train.checkpoint_every=0", *_SHARED.get(name, ()), *extra)


def _assert_trees_equal(a, b):
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


# Carchess and EinStein compile the longest (about 2 min each on 2 CPU
# cores) and run under `-m slow`; the step is game-agnostic, and Nannon
# (chance, two players) and Breakthrough exercise it in CI. Catch (one
# player, no chance: no surplus to check) is -m slow too: its Anakin step
# trains in the run-loop tests (test_robustness, test_sharding, below).
_SLOW_STEP = ("carchess", "einstein", "catch")


@pytest.mark.parametrize(
  "name",
  [
    pytest.param(n, marks=pytest.mark.slow) if n in _SLOW_STEP else n
    for n in envs.registered(adapted=False)
  ],
)
def test_anakin_steps_run_on_every_game(name):
  learner = Learner(tiny_config(name))
  state = learner.init(jax.random.PRNGKey(0))
  transitions = 0
  for _ in range(3):
    state, metrics = learner.jit_step(state)
    transitions += int(metrics["transitions"])
  metrics = jax.device_get(metrics)
  assert int(state.update_step) > 0, "no update was applied"
  assert np.isfinite(metrics.terms["loss"])
  # T transitions per lane per chunk over time: what a lane makes beyond its
  # quota (searching only at decisions, lanes move in whole chance runs) is
  # its next chunk's surplus.
  assert int(state.env_steps) == transitions
  surplus = np.asarray(state.actor.surplus)
  assert transitions - 3 * learner.transitions_per_chunk == surplus.sum()
  assert np.all((0 <= surplus) & (surplus <= learner.env.chance_run))
  assert int(metrics.search.searches) >= int(metrics["decision_steps"])
  for leaf in jax.tree.leaves(state.params):
    assert np.all(np.isfinite(np.asarray(leaf)))


def test_save_restore_identical_next_step(tmp_path):
  learner = Learner(tiny_config("catch"))
  state = learner.init(jax.random.PRNGKey(1))
  state, _ = learner.jit_step(state)
  meta = ckpt.make_metadata(
    learner.config.to_dict(), "catch", learner.env.version, int(state.update_step)
  )
  ckpt.save(str(tmp_path), int(state.update_step), jax.device_get(state), meta)
  restored, meta2 = ckpt.restore(str(tmp_path), jax.device_get(state))
  assert meta2["env_id"] == "catch"
  _assert_trees_equal(restored, state)
  a, _ = learner.jit_step(state)
  b, _ = learner.jit_step(jax.tree.map(jax.numpy.asarray, restored))
  _assert_trees_equal(a, b)


def test_restore_errors(tmp_path):
  learner = Learner(tiny_config("catch"))
  state = jax.device_get(learner.init(jax.random.PRNGKey(1)))
  with pytest.raises(ckpt.CheckpointError, match="does not exist"):
    ckpt.restore(str(tmp_path / "missing"), state)
  with pytest.raises(ckpt.CheckpointError, match="no checkpoints found"):
    ckpt.restore(str(tmp_path), state)
  meta = ckpt.make_metadata(learner.config.to_dict(), "catch", 1, 0)
  ckpt.save(str(tmp_path / "c"), 0, state, meta)
  with pytest.raises(ckpt.CheckpointError, match="step 5 is not in"):
    ckpt.restore(str(tmp_path / "c"), state, step=5)
  other = Learner(tiny_config("catch", ["network.latent_dim=12"]))
  other_state = jax.device_get(other.init(jax.random.PRNGKey(1)))
  with pytest.raises(ckpt.CheckpointError, match="does not fit|another network"):
    ckpt.restore(str(tmp_path / "c"), other_state)
  with pytest.raises(ckpt.CheckpointError, match="is for env 'catch', not 'nannon'"):
    ckpt.check_compatible(
      ckpt.load_metadata(str(tmp_path / "c")), "c", env_id="nannon", env_version=1
    )


def test_resume_equals_uninterrupted(tmp_path):
  cfg = tiny_config("catch")
  full = run.train(cfg, logdir=str(tmp_path / "full"), max_updates=8, progress=False)
  part = run.train(cfg, logdir=str(tmp_path / "part"), max_updates=4, progress=False)
  assert int(part.state.update_step) < int(full.state.update_step)
  with pytest.raises(ValueError, match="pass --resume"):
    run.train(cfg, logdir=str(tmp_path / "part"), max_updates=8, progress=False)
  other = tiny_config("catch", ["train.learning_rate=0.5"])
  with pytest.raises(ValueError, match="another config"):
    run.train(other, logdir=str(tmp_path / "part"), resume=True, max_updates=8, progress=False)
  resumed = run.train(
    cfg, logdir=str(tmp_path / "part"), resume=True, max_updates=8, progress=False
  )
  _assert_trees_equal(resumed.state, full.state)
  # TensorBoard events were written.
  assert any(f.startswith("events.out.tfevents") for f in os.listdir(tmp_path / "full"))
