"""Catch: hand-built rules, and differential tests against OpenSpiel `catch`
and gymnax `Catch-bsuite` over thousands of games with matched chance."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs

NUM_GAMES = 2000


def _play_ours(env, ball_cols, actions):
  """Plays all games in one jitted scan. Returns per-step observations
  `[T+1, N, rows, cols]`, rewards `[T, N]`, terminated `[T+1, N]`, players."""

  @jax.jit
  def run(ball_cols, actions):
    s = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), ball_cols.shape[0]))
    s = jax.vmap(env.step)(s, ball_cols)  # the chance node: the ball's column

    def body(s, a):
      s2 = jax.vmap(env.step)(s, a)
      return s2, (s2.observation[..., 0], s2.rewards[:, 0], s2.terminated, s2.current_player)

    _, (obs, rew, term, player) = jax.lax.scan(body, s, actions.T)
    obs = jnp.concatenate([s.observation[None, ..., 0], obs])
    term = jnp.concatenate([s.terminated[None], term])
    player = jnp.concatenate([s.current_player[None], player])
    return obs, rew, term, player

  return jax.device_get(run(jnp.asarray(ball_cols), jnp.asarray(actions)))


@pytest.mark.parametrize("rows,columns", [(10, 5), (6, 4)])
def test_matches_openspiel(rows, columns):
  pyspiel = pytest.importorskip("pyspiel")
  game = pyspiel.load_game(f"catch(rows={rows},columns={columns})")
  env = envs.make("catch", rows=rows, columns=columns)
  rng = np.random.default_rng(rows * 100 + columns)
  ball_cols = rng.integers(0, columns, NUM_GAMES)
  actions = rng.integers(0, 3, (NUM_GAMES, rows - 1))
  obs, rew, term, player = _play_ours(env, ball_cols, actions)
  for i in range(NUM_GAMES):
    s = game.new_initial_state()
    assert s.is_chance_node()
    assert [o for o, _ in s.chance_outcomes()] == list(range(columns))
    s.apply_action(int(ball_cols[i]))
    for t in range(rows - 1):
      assert not s.is_terminal() and not term[t, i]
      assert player[t, i] == s.current_player() == 0
      np.testing.assert_array_equal(
        obs[t, i], np.asarray(s.observation_tensor()).reshape(rows, columns)
      )
      s.apply_action(int(actions[i, t]))
      assert rew[t, i] == s.rewards()[0], (i, t)
    assert s.is_terminal() and term[rows - 1, i]
    assert player[rows - 1, i] == envs.TERMINAL


@pytest.mark.parametrize("rows,columns", [(10, 5), (7, 3)])
def test_matches_gymnax(rows, columns):
  pytest.importorskip("gymnax")
  from gymnax.environments.bsuite import catch as gcatch

  genv = gcatch.Catch(rows=rows, columns=columns)
  params = genv.default_params
  env = envs.make("catch", rows=rows, columns=columns)
  rng = np.random.default_rng(rows * 10 + columns)
  ball_cols = rng.integers(0, columns, NUM_GAMES)
  actions = rng.integers(0, 3, (NUM_GAMES, rows - 1))
  obs, rew, term, _ = _play_ours(env, ball_cols, actions)

  @jax.jit
  def run_gymnax(ball_cols, actions):
    n = ball_cols.shape[0]
    state = gcatch.EnvState(
      ball_x=ball_cols.astype(jnp.int32),
      ball_y=jnp.zeros((n,), jnp.int32),
      paddle_x=jnp.full((n,), columns // 2, jnp.int32),
      paddle_y=jnp.full((n,), rows - 1, jnp.int32),
      prev_done=jnp.zeros((n,), bool),
      time=jnp.zeros((n,), jnp.int32),
    )
    obs0 = jax.vmap(genv.get_obs)(state)

    def body(state, a):
      o, state, r, done, _ = jax.vmap(genv.step_env, in_axes=(None, 0, 0, None))(
        jax.random.PRNGKey(0), state, a, params
      )
      return state, (o, r, done)

    _, (o, r, d) = jax.lax.scan(body, state, actions.T)
    return obs0, o, r, d

  obs0, gobs, grew, gdone = jax.device_get(run_gymnax(jnp.asarray(ball_cols), jnp.asarray(actions)))
  np.testing.assert_array_equal(obs[0], obs0)
  np.testing.assert_array_equal(obs[1:], gobs)
  np.testing.assert_array_equal(rew, grew)
  np.testing.assert_array_equal(term[1:], gdone)


def _start(env, column):
  s = env.init(jax.random.PRNGKey(0))
  assert int(s.current_player) == envs.CHANCE
  np.testing.assert_allclose(
    s.chance_probs, np.full(env.num_chance_outcomes, 1 / env.num_chance_outcomes)
  )
  return env.step(s, column)


def test_catch_rules_by_hand():
  env = envs.make("catch")  # 10 x 5, paddle starts at column 2
  s = _start(env, 4)
  assert int(s.current_player) == 0
  assert s.observation[0, 4, 0] == 1 and s.observation[9, 2, 0] == 1
  assert float(s.observation.sum()) == 2
  # Left at the wall stays at the wall; right moves one column.
  for a, col in [(0, 1), (0, 0), (0, 0), (2, 1), (1, 1)]:
    s = env.step(s, a)
    assert int(s.game.paddle_col) == col
    assert float(s.rewards[0]) == 0 and not bool(s.terminated)
  for a in (2, 2, 2):
    s = env.step(s, a)
  assert not bool(s.terminated)
  s = env.step(s, 2)  # the 9th move: the wall keeps the paddle at 4
  assert int(s.game.paddle_col) == 4 and bool(s.terminated)
  assert float(s.rewards[0]) == 1.0 and int(s.step_count) == 10  # chance + 9 moves
  # Missing the ball gives -1.
  s = _start(env, 0)
  for _ in range(9):
    s = env.step(s, 1)
  assert bool(s.terminated) and float(s.rewards[0]) == -1.0
  # Terminal is absorbing.
  s2 = env.step(s, 1)
  assert float(s2.rewards[0]) == 0 and int(s2.step_count) == int(s.step_count)


def test_check_action_messages():
  env = envs.make("catch")
  s = env.init(jax.random.PRNGKey(0))
  with pytest.raises(ValueError, match="chance outcome 5 is impossible.*0, 1, 2, 3, 4"):
    env.check_action(s, 5)
  s = env.step(s, 2)
  with pytest.raises(ValueError, match=r"action 3 is illegal.*0 \(left\)"):
    env.check_action(s, 3)
  env.check_action(s, 2)
  s = env.checked_step(s, 2)
  assert int(s.game.paddle_col) == 3
  render = env.render(s)
  assert render.splitlines()[-1] == "...=." and "o" in render
