"""scripts/benchmark_train.py: clear errors for bad input; a tiny profile
prints the breakdown and both paths' end-to-end figures."""

import pytest
import tiny

TINY = [
  "network.hidden=[8]",
  "network.latent_dim=4",
  "search.num_simulations=2",
  "train.num_envs=4",
  "train.rollout_length=4",
  "train.replay_capacity=24",
  "train.min_replay=4",
  "train.batch_size=4",
  "train.unroll_steps=2",
]


def _run(*args):
  return tiny.run_script("benchmark_train", *args, timeout=900)


@pytest.mark.parametrize(
  "args,message",
  [
    (["--env=chess"], "unknown env 'chess'; registered envs:"),
    (["--env=catch", "--repeats=0"], "--repeats must be >= 1"),
    (["--env=catch", "train.search_at_chance=true"], "set by the benchmark"),
    (["--env=catch", "train.batchsize=3"], "unknown key(s) train.batchsize"),
  ],
)
def test_bad_input_is_a_clear_error(args, message):
  out = _run(*args)
  assert out.returncode == 2, out.stdout + out.stderr
  assert message in out.stderr, out.stderr
  assert "Traceback" not in out.stderr


@pytest.mark.slow
def test_tiny_profile_prints_both_paths():
  out = _run("--env=nannon", "--repeats=1", *TINY)
  assert out.returncode == 0, out.stdout + out.stderr
  for word in (
    "rollout",
    "search",
    "replay_add",
    "replay_prepare",
    "update",
    "env transitions/s",
    "simulations/s",
    "updates/s",
    "decisions",
    "everywhere",
    "ratio",
  ):
    assert word in out.stdout, out.stdout
