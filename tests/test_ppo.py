"""anakin_mz.agents.ppo: GAE by hand (termination and truncation), the legal mask,
PPO learning Catch to near return 1, TensorBoard rows under run.py's tags,
the shipped PureJaxRL configs, clear errors, and PPO through `anakin-mz
train --agent=ppo` (its one path: the config library and the run loop)."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

import envs
from anakin_mz import config as config_lib
from anakin_mz.eval import plots
from anakin_mz.agents.ppo import PPO, PPOSection, Rollout, gae
from anakin_mz.runtime import mesh as mesh_lib
from anakin_mz.runtime import run, summary


# 256 env steps an iteration, 40 iterations: Catch is learnt in ~8k steps.
# PureJaxRL's gamma 0.99 and clipping 0.5, 10 iterations a logged step.
CATCH = (
  "agent=ppo",
  "discount=0.99",
  "network.hidden=[64,64]",
  "train.num_envs=16",
  "train.rollout_length=16",
  "train.total_updates=40",
  "train.learning_rate=3e-3",
  "train.max_grad_norm=0.5",
  "train.eval_every=0",
  "train.checkpoint_every=0",
  "train.log_every=10",
  "ppo.num_minibatches=4",
  "ppo.iterations=10",
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
  ppo = PPO(envs.make("catch"), config_lib.load("catch", list(CATCH)))
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
  one_device = mesh_lib.make_mesh(jax.local_devices()[:1])
  result = run.train(
    config_lib.load("catch", list(CATCH)), logdir=logdir, progress=False, mesh=one_device
  )
  return logdir, result.history


def test_ppo_learns_catch(catch_run):
  _, history = catch_run
  assert [row["env_steps"] for row in history] == [2560, 5120, 7680, 10240]
  first, last = history[0][summary.RETURN], history[-1][summary.RETURN]
  # Random play catches 1 ball in 5 (return -0.6); PPO ends near 1.
  assert first < 0.0, history
  assert last > 0.75, history
  assert history[-1]["episodes"] > 100  # 9-step episodes, 2560 steps a chunk
  assert all(r["wall_s"] > 0 and r[summary.ENV_STEPS_PER_S] > 0 for r in history)


def test_tensorboard_rows_use_run_py_tags(catch_run):
  logdir, history = catch_run
  scalars = plots.load_scalars(logdir)
  steps, returns = scalars["selfplay/return_p0"]
  np.testing.assert_array_equal(steps, [10, 20, 30, 40])
  np.testing.assert_allclose(returns, [r[summary.RETURN] for r in history], rtol=1e-6)
  np.testing.assert_array_equal(scalars["train/env_steps"][1], [2560, 5120, 7680, 10240])
  for tag in ("train/wall_s", "train/loss", "train/value_loss", "throughput/env_steps_per_s"):
    assert tag in scalars


@pytest.mark.parametrize(
  "override,message",
  [
    ("ppo.activation=gelu", "ppo activation must be one of ['relu', 'tanh'], got 'gelu'"),
    ("ppo.update_epochs=0", "ppo update_epochs must be >= 1, got 0"),
    ("ppo.iterations=0", "ppo iterations must be >= 1, got 0"),
    ("ppo.gae_lambda=1.5", "ppo gae_lambda must be in [0, 1], got 1.5"),
    ("ppo.num_envs=4", "unknown key(s) ppo.num_envs; valid keys in 'ppo': activation, anneal_lr"),
    ("ppo.anneal_lr=maybe", "ppo.anneal_lr must be of type bool"),
  ],
)
def test_bad_ppo_settings_are_clear_errors(override, message):
  with pytest.raises(ValueError) as e:
    config_lib.load("catch", ["agent=ppo", override])
  assert message in str(e.value)


def test_ppo_is_one_section_of_the_config():
  config = config_lib.load("catch", ["agent=ppo", "ppo.iterations=5"])
  assert config.agent_config == PPOSection(iterations=5)
  assert config_lib.from_dict(config.to_dict()) == config
  with pytest.raises(ValueError, match="num_minibatches .* must divide train.num_envs"):
    config_lib.load("catch", ["agent=ppo", "train.num_envs=3", "train.rollout_length=3"])
  with pytest.raises(ValueError, match="agent 'ppo' does not support env 'nannon'"):
    config_lib.load("nannon", ["agent=ppo"])
  with pytest.raises(ValueError, match="PPO needs an `agent: ppo` config, got agent 'ndmz'"):
    PPO(envs.make("catch"), config_lib.load("catch"))


def test_shipped_configs_hold_purejaxrl_minatar_settings():
  # What the flat `PPOConfig` defaults were, run through the run loop
  # (docs/results/minatar.md's PPO runs): 64 x 128 steps, 1,220 iterations.
  for game in ("minatar-breakout", "minatar-space_invaders"):
    config, _, _ = config_lib.load_for_env(game, f"ppo/{game}")
    tc = config.train
    assert (config.agent, config.discount, config.network.hidden) == ("ppo", 0.99, (256, 256))
    assert (tc.num_envs, tc.rollout_length, tc.learning_rate, tc.max_grad_norm) == (
      64,
      128,
      5e-4,
      0.5,
    )
    assert tc.total_updates * tc.num_envs * tc.rollout_length == 9_994_240  # 10M // 8,192
    assert config.agent_config == PPOSection(iterations=2)


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
  from anakin_mz.runtime import checkpoint as ckpt
  from anakin_mz.runtime import restore

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


def test_train_script_trains_and_resumes_ppo(tmp_path, capsys):
  # `anakin-mz train --agent=ppo` in this process (`tiny.run_main`): the
  # run-loop test's config, so its compiled step is reused rather than
  # traced again in two fresh processes.
  from anakin_mz.cli import train as train_cli
  from anakin_mz.runtime import checkpoint as ckpt

  logdir = str(tmp_path / "run")
  args = ["--env=catch", "--agent=ppo", "--logdir", logdir, "--no-progress", "--devices=1"]
  args += list(TINY_PPO[1:])
  code = tiny.run_main(train_cli.main, *args, "--updates=2")
  out = capsys.readouterr()
  assert code == 0, out.out + out.err
  assert "last saved update 2" in out.out, out.out
  # `--resume` continues it to the config's budget, as for every agent.
  code = tiny.run_main(train_cli.main, *args, "--resume")
  out = capsys.readouterr()
  assert code == 0, out.out + out.err
  assert "last saved update 4" in out.out, out.out
  assert ckpt.steps(os.path.join(logdir, "checkpoints")) == (2, 4)
