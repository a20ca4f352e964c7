"""anakin_mz.eval.dynamics: the dynamics tests (NDMZ paper 4.3) and the model
accuracy metrics, on hand-built outputs and on Nannon random play."""

import types

import jax
import numpy as np
import pytest

import envs
from anakin_mz.eval import dynamics as diagnostics
from anakin_mz.core.networks import Network, NetworkConfig

K = 3


@pytest.fixture(scope="module")
def nannon():
  env = envs.make("nannon")
  traj = diagnostics.random_play(env, jax.random.PRNGKey(3), num_games=24, max_steps=160)
  return env, traj


def test_random_play_is_a_valid_game(nannon):
  env, traj = nannon
  exists = traj.exists
  # exists is a prefix in time for every game, and every game ends.
  assert np.all(exists[0])
  assert np.all(exists[1:] <= exists[:-1])
  last = exists.sum(0) - 1
  games = np.arange(exists.shape[1])
  assert np.all(traj.player[last, games] == envs.TERMINAL)
  assert np.all(traj.player[:-1][exists[1:]] != envs.TERMINAL)
  decision = exists & (traj.player >= 0)
  chance = exists & (traj.player == envs.CHANCE)
  a = traj.action
  assert np.all(
    np.take_along_axis(traj.legal, np.where(decision, a, 0)[..., None], -1)[..., 0][decision]
  )
  outcome = np.where(chance, a - env.num_actions, 0)
  assert np.all(a[chance] >= env.num_actions)
  assert np.all(np.take_along_axis(traj.chance_probs, outcome[..., None], -1)[..., 0][chance] > 0)
  # Zero-sum: one winner per game.
  totals = np.where(exists[..., None], traj.rewards, 0).sum(0)
  np.testing.assert_allclose(totals.sum(-1), 0)
  assert np.all(np.abs(totals).max(-1) == 1)


def _oracle(env, s):
  """Outputs of a model that knows the game exactly."""
  legal = s["legal"].astype(np.float64)
  policy = np.where(
    legal.any(-1, keepdims=True),
    legal / np.maximum(legal.sum(-1, keepdims=True), 1),
    1.0 / env.num_actions,
  )
  player = s["player"][:, 1:]
  p = env.num_players
  identity = np.where(
    player >= 0,
    np.mod(player - s["root_player"][:, None], p),
    np.where(player == envs.CHANCE, p, p + 1),
  )
  k = s["actions"].shape[1]
  reward = np.take_along_axis(s["rewards"], s["root_player"][:, None, None].repeat(k, 1), -1)[
    ..., 0
  ]
  # Values: the model's equal f(h(.)) of the true states, turned to the
  # root mover's view (Nannon is zero-sum).
  real = np.linspace(-0.9, 0.9, s["player"].size).reshape(s["player"].shape)
  flip = s["player"] != s["root_player"][:, None]
  return {
    "policy": policy,
    "chance": s["chance_probs"].copy(),
    "identity": identity,
    "reward": reward,
    "value": np.where(flip, -real, real),
    "value_real": real,
  }


def _rates(env, s, out):
  res = diagnostics.score(env, s, out)
  return {name: diagnostics._mean(np.asarray(v, float), m) for name, (v, m) in res.items()}


def test_a_perfect_model_passes_every_test(nannon):
  env, traj = nannon
  s = diagnostics.gather_starts(traj, K)
  n = s["observation"].shape[0]
  assert n == int(np.sum(traj.exists & (traj.player >= 0)))
  assert np.all(s["player"][:, 0] >= 0)
  rates = _rates(env, s, _oracle(env, s))
  for name in (
    "top_move",
    "top1",
    "uniform",
    "identity_turn",
    "identity_chance",
    "identity_terminal",
  ):
    mean, count = rates[name]
    assert np.all(mean[count > 0] == 1.0), name
  assert rates["top_move"][1][0] == n
  assert rates["chance_tv"][0][1] == pytest.approx(0.0, abs=1e-6)
  assert np.nanmax(rates["reward_mae"][0]) == pytest.approx(0.0, abs=1e-6)
  assert np.nanmax(rates["value_gap"][0]) == pytest.approx(0.0, abs=1e-6)
  # Depth 0 is never counted (the model's value there is f(h(.)) itself);
  # Nannon's depth 2 (after a move and a roll) is a decision state.
  assert rates["value_gap"][1][0] == 0 and rates["value_gap"][1][2] > 0
  # Nannon alternates move / roll: depth 1 is always a chance state.
  assert rates["identity_chance"][1][1] > 0 and rates["top_move"][1][1] == 0
  assert rates["identity_terminal"][1].sum() > 0


def test_each_mistake_is_counted_once(nannon):
  env, traj = nannon
  s = diagnostics.gather_starts(traj, K)
  out = _oracle(env, s)
  decision = s["exists"] & (s["player"] >= 0)
  some_illegal = decision & ~s["legal"].all(-1)
  i, k = map(int, np.argwhere(some_illegal[:, 1:])[0])
  k += 1
  bad = int(np.argmin(s["legal"][i, k]))
  out["policy"][i, k] = 0.0
  out["policy"][i, k, bad] = 1.0
  j = int(np.argwhere(s["player"][:, 1] == envs.CHANCE)[0, 0])
  out["chance"][j, 1] = np.roll(out["chance"][j, 1], 1)
  out["identity"][j, 0] = 0  # says "root mover" at a chance state
  out["reward"][j, 0] += 0.5
  d = int(np.argwhere(decision[:, 2])[0, 0])
  out["value"][d, 2] += 0.25
  rates = _rates(env, s, out)
  for name in ("top_move", "top1", "uniform"):
    mean, count = rates[name]
    assert mean[k] == pytest.approx(1 - 1 / count[k]), name
    assert np.all(np.delete(mean, k)[np.delete(count, k) > 0] == 1.0)
  mean, count = rates["identity_chance"]
  assert mean[1] == pytest.approx(1 - 1 / count[1])
  tv = 0.5 * np.abs(np.roll(s["chance_probs"][j, 1], 1) - s["chance_probs"][j, 1]).sum()
  assert tv > 0
  assert rates["chance_tv"][0][1] == pytest.approx(tv / rates["chance_tv"][1][1])
  assert rates["reward_mae"][0][1] == pytest.approx(0.5 / rates["reward_mae"][1][1])
  assert rates["value_gap"][0][2] == pytest.approx(0.25 / rates["value_gap"][1][2])
  assert np.nanmax(np.delete(rates["value_gap"][0], 2)) == pytest.approx(0.0, abs=1e-6)


def _synthetic(probs, legal, root_player=0, rewards=(0.0, 0.0), next_player=1):
  """One start, K = 1, of a fake 2-player game with 4 actions."""
  env = types.SimpleNamespace(num_players=2, num_actions=4, payoff="zero_sum")
  s = {
    "actions": np.zeros((1, 1), np.int32),
    "root_player": np.array([root_player]),
    "player": np.array([[root_player, next_player]]),
    "legal": np.array([[legal, legal]]),
    "chance_probs": np.zeros((1, 2, 2)),
    "rewards": np.array([[rewards]], np.float32),
    "exists": np.ones((1, 2), bool),
  }
  out = {
    "policy": np.array([[probs, probs]]),
    "chance": np.zeros((1, 2, 2)),
    "identity": np.zeros((1, 1), np.int64),
    "reward": np.zeros((1, 1)),
    "value": np.zeros((1, 2)),
    "value_real": np.zeros((1, 2)),
  }
  return env, s, out


@pytest.mark.parametrize(
  "probs,top_move,top1,uniform",
  [
    ([0.4, 0.3, 0.2, 0.1], 1, 1, 1),  # legal moves ranked first
    ([0.4, 0.1, 0.3, 0.2], 0, 1, 0),  # an illegal move above a legal one; 0.3 > 1/4
    ([0.3, 0.3, 0.2, 0.2], 1, 1, 1),  # ties at the boundary pass both tests
    ([0.2, 0.2, 0.25, 0.35], 0, 0, 0),  # the top move is illegal
    ([0.5, 0.26, 0.24, 0.0], 1, 1, 1),  # illegal 0.24 < legal 0.26 and < 1/4
  ],
)
def test_top_move_and_uniform_semantics(probs, top_move, top1, uniform):
  env, s, out = _synthetic(probs, [True, True, False, False])
  res = diagnostics.score(env, s, out)
  assert bool(res["top_move"][0][0, 0]) == bool(top_move)
  assert bool(res["top1"][0][0, 0]) == bool(top1)
  assert bool(res["uniform"][0][0, 0]) == bool(uniform)


def test_rewards_and_identity_are_seen_from_the_root_mover():
  # Root mover is player 1; the transition pays player 1 +1; next mover is
  # player 0, relative player 1.
  env, s, out = _synthetic(
    [1, 0, 0, 0], [True] * 4, root_player=1, rewards=(-1.0, 1.0), next_player=0
  )
  out["reward"][:] = 1.0
  out["identity"][:] = 1
  res = diagnostics.score(env, s, out)
  assert res["reward_mae"][0][0, 1] == 0.0
  assert res["identity_turn"][0][0, 1] and res["identity_turn"][1][0, 1]
  out["reward"][:] = -1.0
  out["identity"][:] = 0
  res = diagnostics.score(env, s, out)
  assert res["reward_mae"][0][0, 1] == 2.0
  assert not res["identity_turn"][0][0, 1]
  # The real next state is player 0's: its own value 0.5 is -0.5 for the root
  # mover (player 1), so a model value of -0.5 has no gap, +0.5 a gap of 1.
  out["value_real"][:] = 0.5
  out["value"][:] = -0.5
  res = diagnostics.score(env, s, out)
  assert res["value_gap"][0][0, 1] == 0.0 and res["value_gap"][1][0, 1]
  assert not res["value_gap"][1][0, 0]  # depth 0 is not counted
  out["value"][:] = 0.5
  assert diagnostics.score(env, s, out)["value_gap"][0][0, 1] == 1.0


def test_dynamics_tests_on_a_network():
  env = envs.make("nannon")
  net = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  params = net.init(jax.random.PRNGKey(0))
  report = diagnostics.dynamics_tests(
    env,
    net,
    params,
    jax.random.PRNGKey(1),
    num_games=8,
    unroll_steps=2,
    max_steps=160,
    batch_size=64,
  )
  assert list(report.depth) == [0, 1, 2]
  assert report.counts["top_move"][0] == report.num_positions > 0
  for name in diagnostics.METRICS:
    v = report.values[name]
    assert v.shape == (3,)
    if name not in ("reward_mae", "value_gap"):
      assert np.all((v[np.isfinite(v)] >= 0) & (v[np.isfinite(v)] <= 1)), name
  tags = report.scalars()
  assert "dynamics/top_move_k0" in tags and "dynamics/chance_tv_k1" in tags
  assert "dynamics/value_gap_k2" in tags and "dynamics/value_gap_k0" not in tags
  assert "dynamics/identity_turn_k0" not in tags  # no identity at the root
  assert "top-move" in report.table()
