"""anakin_mz.agents.ppo: GAE by hand (termination and truncation), the legal mask,
PPO learning Catch to near return 1, same seed same run, TensorBoard rows
under run.py's tags, and clear errors (library and scripts/ppo.py)."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz.eval import plots
from anakin_mz.agents.ppo import PPO, PPOConfig, Rollout, gae, train

ROOT = os.path.join(os.path.dirname(__file__), "..")

# 256 env steps an iteration, 40 iterations: Catch is learnt in ~8k steps.
CATCH = PPOConfig(
  num_envs=16,
  num_steps=16,
  total_env_steps=256 * 40,
  num_minibatches=4,
  hidden=(64, 64),
  learning_rate=3e-3,
)


def _rollout(**fields):
  t, n = np.shape(fields["value"])
  zeros = np.zeros((t, n), np.float32)
  base = dict(
    observation=np.zeros((t, n, 1), np.float32),
    legal=np.ones((t, n, 2), bool),
    action=np.zeros((t, n), np.int32),
    log_prob=zeros,
  )
  base.update({k: np.asarray(v, np.float32) for k, v in fields.items()})
  for k in ("terminated", "done"):
    base[k] = np.asarray(fields[k], bool)
  return Rollout(**base)


def test_gae_by_hand():
  # Lane 0 terminates at t=2; lane 1 is truncated at t=1 (bootstraps from the
  # state it was cut at, next_value 5, but the sum stops there).
  r = _rollout(
    value=[[1, 1], [2, 1], [3, 1]],
    reward=[[1, 0], [0, 0], [2, 0]],
    next_value=[[2, 1], [3, 5], [4, 1]],
    terminated=[[0, 0], [0, 0], [1, 0]],
    done=[[0, 0], [0, 1], [1, 0]],
  )
  adv, target = gae(r, gamma=0.5, gae_lambda=0.5)
  # lane 0: deltas 1, -0.5, -1; A2 = -1, A1 = -0.5 + 0.25 A2, A0 = 1 + 0.25 A1.
  # lane 1: deltas -0.5, 1.5, -0.5; A2 = -0.5, A1 = 1.5 (cut), A0 = -0.5 + 0.25 * 1.5.
  np.testing.assert_allclose(adv, [[0.8125, -0.125], [-0.75, 1.5], [-1.0, -0.5]])
  np.testing.assert_allclose(target, np.asarray(adv) + np.asarray(r.value))


def test_illegal_actions_get_no_probability():
  ppo = PPO(envs.make("catch"), CATCH)
  obs = jnp.zeros((4, 10, 5, 1))
  params = ppo.network.init(jax.random.PRNGKey(0), obs)
  legal = jnp.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1]], bool)
  logits, value = ppo._apply(params, obs, legal)
  probs = np.asarray(jax.nn.softmax(logits))
  np.testing.assert_array_equal(probs[~np.asarray(legal)], 0.0)
  np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-6)
  assert value.shape == (4,)


@pytest.fixture(scope="module")
def catch_run(tmp_path_factory):
  logdir = str(tmp_path_factory.mktemp("ppo_catch"))
  _, history = train(envs.make("catch"), CATCH, jax.random.PRNGKey(0), log_every=10, logdir=logdir)
  return logdir, history


def test_ppo_learns_catch(catch_run):
  _, history = catch_run
  assert [row["env_steps"] for row in history] == [2560, 5120, 7680, 10240]
  first, last = history[0]["return"], history[-1]["return"]
  # Random play catches 1 ball in 5 (return -0.6); PPO ends near 1.
  assert first < 0.0, history
  assert last > 0.75, history
  assert history[-1]["episodes"] > 100  # 9-step episodes, 2560 steps a chunk
  assert all(r["wall_s"] > 0 and r["env_steps_per_s"] > 0 for r in history)


def test_same_seed_same_run():
  config = PPOConfig(**{**CATCH.__dict__, "total_env_steps": 256 * 4})
  _, a = train(envs.make("catch"), config, jax.random.PRNGKey(0), log_every=2)
  _, b = train(envs.make("catch"), config, jax.random.PRNGKey(0), log_every=2)
  timing = ("wall_s", "env_steps_per_s")
  strip = lambda h: [{k: v for k, v in row.items() if k not in timing} for row in h]
  assert strip(a) == strip(b)


def test_tensorboard_rows_use_run_py_tags(catch_run):
  logdir, history = catch_run
  scalars = plots.load_scalars(logdir)
  steps, returns = scalars["selfplay/return_p0"]
  np.testing.assert_array_equal(steps, [10, 20, 30, 40])
  np.testing.assert_allclose(returns, [r["return"] for r in history], rtol=1e-6)
  np.testing.assert_array_equal(scalars["train/env_steps"][1], [2560, 5120, 7680, 10240])
  for tag in ("train/wall_s", "train/loss", "train/value_loss", "throughput/env_steps_per_s"):
    assert tag in scalars


def test_config_and_env_errors():
  with pytest.raises(ValueError, match="num_minibatches .* must divide"):
    PPOConfig(num_envs=3, num_steps=3, num_minibatches=2)
  with pytest.raises(ValueError, match="total_env_steps"):
    PPOConfig(num_envs=4, num_steps=4, total_env_steps=8)
  with pytest.raises(ValueError, match="activation"):
    PPOConfig(activation="gelu")
  with pytest.raises(ValueError, match="gamma"):
    PPOConfig(gamma=1.5)
  assert PPOConfig(hidden=[8]).hidden == (8,)
  assert PPOConfig(num_envs=4, num_steps=8, total_env_steps=100).num_iterations == 3
  with pytest.raises(ValueError, match="single-player; env 'nannon' has 2 players"):
    PPO(envs.make("nannon"), CATCH)
  with pytest.raises(ValueError, match="log_every"):
    train(envs.make("catch"), CATCH, jax.random.PRNGKey(0), log_every=0)


@pytest.mark.parametrize(
  "args,message",
  [
    (["--env", "nannon"], "single-player"),
    (["--env", "catch", "num_envs=0"], "num_envs must be >= 1"),
    (["--env", "catch", "numenvs=4"], "unknown PPO key 'numenvs'"),
    (["--env", "catch", "anneal_lr=maybe"], "anneal_lr must be like its default"),
    (["--env", "catch", "--minutes", "0"], "--minutes must be > 0"),
    (["--env", "chess"], "chess"),
  ],
)
def test_script_bad_input_is_a_clear_error(args, message):
  out = subprocess.run(
    [sys.executable, os.path.join(ROOT, "scripts", "ppo.py"), *args],
    capture_output=True,
    text=True,
    timeout=300,
    cwd=ROOT,
  )
  assert out.returncode == 2, out.stdout + out.stderr
  assert message in out.stderr and "Traceback" not in out.stderr, out.stderr


# PPO through the run loop, like every agent: `anakin-mz train --agent=ppo`.
TINY_PPO = (
  "agent=ppo",
  "env.params.rows=5",
  "env.params.columns=3",
  "train.num_envs=4",
  "train.rollout_length=8",
  "train.total_updates=4",
  "train.eval_every=0",
  "train.log_every=1",
  "train.checkpoint_every=2",
  "network.hidden=[8]",
  "ppo.num_minibatches=2",
  "ppo.update_epochs=1",
)


def test_run_loop_trains_checkpoints_and_resumes_exactly(tmp_path):
  from anakin_mz import config as config_lib
  from anakin_mz.runtime import checkpoint as ckpt
  from anakin_mz.runtime import restore
  from anakin_mz.runtime import run

  config = config_lib.load("catch", list(TINY_PPO))
  assert config.to_dict()["ppo"]["num_minibatches"] == 2
  assert config_lib.from_dict(config.to_dict()) == config
  whole = run.train(config, logdir=str(tmp_path / "whole"), progress=False)
  assert int(whole.state.update_step) == 4 and int(whole.state.env_steps) == 4 * 32
  assert ckpt.steps(whole.checkpoint_dir) == (2, 4)
  row = whole.history[-1]
  assert row["transitions"] == 32 and "searches" not in row and "temperature" not in row
  run.train(config, logdir=str(tmp_path / "split"), max_updates=2, progress=False)
  resumed = run.train(config, logdir=str(tmp_path / "split"), resume=True, progress=False)
  leaves = lambda s: [np.asarray(x) for x in jax.tree.leaves(jax.device_get(s))]
  for a, b in zip(leaves(whole.state), leaves(resumed.state)):
    np.testing.assert_array_equal(a, b)
  # Restoring for evaluation reads the params alone; the greedy player plays.
  agent = restore.load_agent(whole.checkpoint_dir, expect_env="catch")
  assert agent.step == 4
  for a, b in zip(leaves(agent.params), leaves(whole.state.params)):
    np.testing.assert_array_equal(a, b)
  state = jax.jit(
    lambda k: jax.vmap(agent.env.step)(
      jax.vmap(agent.env.init)(jax.random.split(k, 3)), jnp.zeros((3,), jnp.int32)
    )
  )(jax.random.PRNGKey(0))
  actions = jax.jit(agent.search_policy())(state, jax.random.PRNGKey(1))
  assert actions.shape == (3,)


def test_ppo_config_round_trips_through_the_run_config():
  from anakin_mz import config as config_lib
  from anakin_mz.agents.ppo import PPOSection

  config = CATCH.run_config(envs.make("catch"), seed=3, iterations=5)
  assert config.agent == "ppo" and config.seed == 3 and config.discount == CATCH.gamma
  assert config.agent_config == PPOSection(**CATCH.settings(), iterations=5)
  assert PPOConfig.of(config) == CATCH
  with pytest.raises(ValueError, match="num_minibatches .* must divide train.num_envs"):
    config_lib.load("catch", ["agent=ppo", "train.num_envs=3", "train.rollout_length=3"])
  with pytest.raises(ValueError, match="agent 'ppo' does not support env 'nannon'"):
    config_lib.load("nannon", ["agent=ppo"])


def test_train_script_trains_and_resumes_ppo(tmp_path):
  logdir = str(tmp_path / "run")
  args = [
    sys.executable,
    os.path.join(ROOT, "scripts", "train.py"),
    "--env=catch",
    "--agent=ppo",
    "--logdir",
    logdir,
    "--no-progress",
    "--devices=1",
    *TINY_PPO[1:],
  ]
  out = subprocess.run(
    [*args, "--updates=2"], capture_output=True, text=True, timeout=600, cwd=ROOT
  )
  assert out.returncode == 0, out.stdout + out.stderr
  assert "last saved update 2" in out.stdout, out.stdout
  # `--resume` continues it to the config's budget, as for every agent.
  from anakin_mz.runtime import checkpoint as ckpt

  out = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=600, cwd=ROOT)
  assert out.returncode == 0, out.stdout + out.stderr
  assert "last saved update 4" in out.stdout, out.stdout
  assert ckpt.steps(os.path.join(logdir, "checkpoints")) == (2, 4)
