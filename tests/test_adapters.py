"""The gymnax and pgx adapters, both ways: differential runs against the
wrapped library, pgx's own API test and gymnax's idioms on our games, and
the errors. (The contract suite covers `minatar-*`, `pgx-*` and the round
trips in tests/test_contract.py.)"""

import sys
import typing

import gymnax
import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

import envs
from envs import testing


def _split2(key):
  return jax.random.split(key)[0]


def test_minatar_matches_gymnax_step_for_step():
  # Our reset(key) draws gymnax's reset with split(split(key)[0])[0]; a keyed
  # step(state, a, k) runs gymnax's step_env with split(k)[0].
  env = envs.make("minatar-breakout")
  genv, params = gymnax.make("Breakout-MinAtar")
  key = jax.random.PRNGKey(0)
  s = env.reset(key)
  obs, gs = genv.reset_env(_split2(_split2(key)), params)
  step = jax.jit(env.step)
  gstep = jax.jit(genv.step_env)
  total = 0.0
  for t in range(300):
    k = jax.random.fold_in(key, t)
    a = jax.random.randint(jax.random.fold_in(k, 1), (), 0, env.num_actions)
    np.testing.assert_array_equal(np.asarray(s.observation), np.asarray(obs, np.float32))
    s = step(s, a, k)
    obs, gs, r, term, _ = gstep(_split2(k), gs, a, params)
    assert float(s.rewards[0]) == float(r)
    assert bool(s.terminated) == bool(term)
    total += float(r)
    if bool(term):
      break
  assert bool(term) and total > 0  # a whole game, with bricks hit


def test_minatar_truncates_at_the_episode_limit():
  env = envs.make("minatar-freeway", max_steps_in_episode=5)
  assert env.max_game_length == 5
  s = env.reset(jax.random.PRNGKey(0))
  for t in range(5):
    assert not bool(s.done)
    s = env.step(s, jnp.int32(0), jax.random.PRNGKey(t))
  assert bool(s.truncated) and not bool(s.terminated)
  flat = envs.make("minatar-breakout", observation="flat")
  assert flat.observation_shape == (400,)
  assert flat.reset(jax.random.PRNGKey(0)).observation.shape == (400,)


def test_minatar_history_stacks_the_last_frames_and_actions():
  """history=3: the observation is the last three gymnax frames (oldest
  first, zeros before the episode) then three one-hot action planes (the
  action into each frame; zeros before the episode and into the first),
  step for step against gymnax; the flat form is its flattening."""
  L = 3
  env = envs.make("minatar-space_invaders", history=L)
  flat = envs.make("minatar-space_invaders", history=L, observation="flat")
  genv, params = gymnax.make("SpaceInvaders-MinAtar", use_minimal_action_set=True)
  c, a_n = 6, env.num_actions
  assert env.observation_shape == (10, 10, L * (c + a_n))
  assert flat.observation_shape == (10 * 10 * L * (c + a_n),)
  key = jax.random.PRNGKey(1)
  s, sf = env.reset(key), flat.reset(key)
  obs, gs = genv.reset_env(_split2(_split2(key)), params)
  frames = [np.zeros((10, 10, c), np.float32)] * (L - 1) + [np.asarray(obs, np.float32)]
  actions = [np.zeros(a_n, np.float32)] * L
  step = jax.jit(env.step)
  for t in range(40):
    want = np.concatenate(
      frames[-L:] + [np.broadcast_to(a, (10, 10, a_n)) for a in actions[-L:]], axis=-1
    )
    np.testing.assert_array_equal(np.asarray(s.observation), want)
    np.testing.assert_array_equal(np.asarray(sf.observation), want.reshape(-1))
    k = jax.random.fold_in(key, t)
    a = jax.random.randint(jax.random.fold_in(k, 1), (), 0, a_n)
    s, sf = step(s, a, k), flat.step(sf, a, k)
    obs, gs, r, term, _ = genv.step_env(_split2(k), gs, a, params)
    frames.append(np.asarray(obs, np.float32))
    actions.append(np.eye(a_n, dtype=np.float32)[int(a)])
    assert float(s.rewards[0]) == float(r) and bool(s.terminated) == bool(term)
    if bool(term):
      break
  assert t > 2 * L and np.any(frames[-1] != frames[-2])  # the window moved
  # history=1 is gymnax's own frame.
  assert envs.make("minatar-space_invaders").observation_shape == (10, 10, c)
  with pytest.raises(
    ValueError, match=r"history must be an integer >= 1 \(frames observed\), got 0"
  ):
    envs.make("minatar-space_invaders", history=0)
  with pytest.raises(ValueError, match="parameter 'history' must be of type int, got 2.5"):
    envs.make("minatar-space_invaders", history=2.5)
  with pytest.raises(ValueError, match=r"history > 1 needs \[H, W, C\] planes"):
    envs.from_gymnax("CartPole-v1", history=2)


@pytest.mark.parametrize("history", [1, 3])
def test_minatar_state_round_trips_through_a_checkpoint(tmp_path, history):
  """The env state (a run's checkpoint holds its self-play games) saves and
  restores with Orbax, with and without a history: Orbax refuses a
  zero-size array, which history=1's empty past once was (that stopped
  every MinAtar run at its first checkpoint)."""
  import orbax.checkpoint as ocp

  env = envs.make("minatar-space_invaders", history=history)
  s = env.reset(jax.random.PRNGKey(0))
  for t in range(4):
    s = env.step(s, jnp.int32(t % env.num_actions), jax.random.PRNGKey(t))
  assert all(leaf.size > 0 for leaf in jax.tree.leaves(s))
  with ocp.StandardCheckpointer() as ckptr:
    ckptr.save(tmp_path / "state", s)
    ckptr.wait_until_finished()
    back = ckptr.restore(tmp_path / "state", s)
  jax.tree.map(np.testing.assert_array_equal, back, s)


def test_from_gymnax_any_env_and_its_params():
  env = envs.from_gymnax("CartPole-v1", max_steps_in_episode=20)
  assert (env.num_players, env.num_actions, env.observation_shape) == (1, 2, (4,))
  assert env.max_game_length == 20 and env.payoff == "single" and env.hidden_chance
  testing.check_playouts(env, jax.random.PRNGKey(0), batch=8)
  with pytest.raises(ValueError, match="unknown gymnax env 'Nope'"):
    envs.from_gymnax("Nope")
  with pytest.raises(ValueError, match="valid parameters"):
    envs.from_gymnax("CartPole-v1", gravity_x=1.0)
  with pytest.raises(ValueError, match="only discrete"):
    envs.from_gymnax("Pendulum-v1")
  with pytest.raises(ValueError, match="observation must be one of"):
    envs.make("minatar-breakout", observation="rgb")


def test_pgx_connect_four_matches_pgx():
  env = envs.make("pgx-connect_four")
  penv = pgx.make("connect_four")
  key = jax.random.PRNGKey(1)
  s = env.reset(key)
  ps = penv.init(_split2(_split2(key)))
  step, pstep = jax.jit(env.step), jax.jit(penv.step)
  for t in range(42):
    assert int(s.current_player) == int(ps.current_player)
    np.testing.assert_array_equal(np.asarray(s.legal_action_mask), np.asarray(ps.legal_action_mask))
    np.testing.assert_array_equal(np.asarray(s.observation), np.asarray(ps.observation, np.float32))
    a = testing.random_action(s, jax.random.PRNGKey(t))
    s, ps = step(s, a), pstep(ps, a)
    np.testing.assert_array_equal(np.asarray(s.rewards), np.asarray(ps.rewards))
    if bool(ps.terminated):
      break
  assert bool(s.terminated) and int(s.current_player) == envs.TERMINAL
  assert float(np.abs(np.asarray(s.rewards)).sum()) in (0.0, 2.0)


def test_pgx_hidden_chance_backgammon_draws_with_the_key():
  env = envs.make("pgx-backgammon")
  assert env.hidden_chance and env.num_players == 2 and env.num_chance_outcomes == 1
  testing.check_hidden_chance(env, jax.random.PRNGKey(0))
  # The dice are drawn inside the step: the same moves from the same start,
  # stepped with different keys, give the next player different dice (pgx
  # keeps them in the state and shows them in the observation).
  s = env.reset(jax.random.PRNGKey(0))
  step = jax.jit(env.step)
  dice = set()
  for i in range(8):
    s2 = s
    for t in range(4):  # a turn is at most 4 moves
      if int(s2.current_player) != int(s.current_player):
        break
      a = testing.random_action(s2, jax.random.PRNGKey(t))
      s2 = step(s2, a, jax.random.PRNGKey(100 + i))
    assert int(s2.current_player) != int(s.current_player)
    dice.add(np.asarray(s2.game.inner._dice).tobytes())  # pylint: disable=protected-access
  assert len(dice) > 1


def test_from_pgx_errors():
  with pytest.raises(ValueError, match="unknown pgx env 'nope'"):
    envs.from_pgx("nope")
  with pytest.raises(ValueError, match="no known length bound"):
    envs.from_pgx("chess")
  assert envs.from_pgx("chess", max_game_length=512).num_actions == 4672


def test_missing_library_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "pgx", None)
  monkeypatch.setitem(sys.modules, "gymnax", None)
  with pytest.raises(ImportError, match=r"install anakin-mz\[pgx\]"):
    envs.from_pgx("tic_tac_toe")
  with pytest.raises(ImportError, match=r"install anakin-mz\[pgx\]"):
    envs.to_pgx(envs.make("catch"))
  with pytest.raises(ImportError, match=r"install anakin-mz\[gymnax\]"):
    envs.make("minatar-breakout")
  with pytest.raises(ImportError, match=r"install anakin-mz\[gymnax\]"):
    envs.to_gymnax(envs.make("catch"))


@pytest.fixture
def pgx_api_test(monkeypatch):
  """pgx's own API test (`pgx._src.api_test`); it accepts only pgx's game
  ids, so ours are added to its list for the test. Its single-state half
  draws moves with `act_randomly(key, mask)`, which samples along axis 1
  and so fails on one unbatched state (pgx 2.6, for pgx's own games too):
  the test gives it the batch axis it expects."""
  from pgx._src import api_test  # pylint: disable=import-outside-toplevel

  batched = api_test.act_randomly

  def act_randomly(key, mask):
    return batched(key, mask[None])[0] if mask.ndim == 1 else batched(key, mask)

  def run(env, num):
    ids = typing.get_args(api_test.EnvId) + (env.id,)
    monkeypatch.setattr(api_test, "EnvId", typing.Literal[ids])
    monkeypatch.setattr(api_test, "act_randomly", act_randomly)
    api_test.api_test(env, num=num, use_key=True)

  return run


@pytest.mark.parametrize("name", ["catch", "nannon", "breakthrough"])
def test_to_pgx_passes_pgx_api_test(name, pgx_api_test):
  penv = envs.to_pgx(envs.make(name))
  assert isinstance(penv, pgx.Env)
  pgx_api_test(penv, num=2)


def test_to_pgx_chance_needs_the_key_and_illegal_moves_follow_pgx():
  penv = envs.to_pgx(envs.make("nannon"))
  s = penv.init(jax.random.PRNGKey(0))
  legal = np.flatnonzero(np.asarray(s.legal_action_mask))
  with pytest.raises(ValueError, match="step\\(state, action, key\\)"):
    penv.step(s, jnp.int32(legal[0]))
  illegal = int(np.flatnonzero(~np.asarray(s.legal_action_mask))[0])
  s2 = penv.step(s, jnp.int32(illegal), jax.random.PRNGKey(1))
  mover = int(s.current_player)
  assert bool(s2.terminated) and float(s2.rewards[mover]) == -1.0
  assert float(s2.rewards[1 - mover]) == 1.0 and bool(s2.legal_action_mask.all())
  s3 = penv.step(s2, jnp.int32(0), jax.random.PRNGKey(2))
  assert not np.any(np.asarray(s3.rewards)) and bool(s3.terminated)
  # Deterministic games step without a key, as pgx's.
  det = envs.to_pgx(envs.make("breakthrough"))
  s = det.init(jax.random.PRNGKey(0))
  a = int(np.flatnonzero(np.asarray(s.legal_action_mask))[0])
  assert int(det.step(s, jnp.int32(a)).current_player) != int(s.current_player)


@pytest.mark.parametrize("name", ["catch", "nannon"])
def test_to_gymnax_follows_the_gymnax_interface(name):
  from gymnax.wrappers.purerl import LogWrapper  # pylint: disable=import-outside-toplevel

  ours = envs.make(name)
  genv, params = envs.to_gymnax(ours)
  assert genv.num_actions == ours.num_actions == genv.action_space(params).n
  assert genv.observation_space(params).shape == ours.observation_shape
  batch, steps = 8, 2 * ours.max_game_length
  env = LogWrapper(genv)

  @jax.jit
  def rollout(key):
    obs, state = jax.vmap(env.reset, (0, None))(jax.random.split(key, batch), params)

    def body(carry, k):
      obs, state = carry
      ka, ks = jax.random.split(k)
      mask = state.env_state.inner.legal_action_mask
      a = jax.vmap(jax.random.categorical)(jax.random.split(ka, batch), jnp.where(mask, 0.0, -1e9))
      obs, state, r, term, trunc, info = jax.vmap(env.step, (0, 0, 0, None))(
        jax.random.split(ks, batch), state, a, params
      )
      return (obs, state), (obs, r, term | trunc, info["returned_episode_returns"], info)

    _, out = jax.lax.scan(body, (obs, state), jax.random.split(key, steps))
    return obs, out

  obs0, (obs, r, done, returns, info) = rollout(jax.random.PRNGKey(0))
  assert obs0.shape == (batch,) + ours.observation_shape and obs.dtype == jnp.float32
  assert bool(jax.vmap(genv.observation_space(params).contains)(obs0).all())
  assert bool(done.any())  # episodes end and gymnax resets them
  assert not bool(jnp.any(info["rewards"].sum(-1) != 0)) or ours.payoff != "zero_sum"
  if name == "catch":
    # Every finished episode of Catch returns +1 or -1.
    assert set(np.unique(np.asarray(returns)[np.asarray(done)])) <= {-1.0, 1.0}
  else:
    # The reward is the mover's: a finished game pays +1 or -1 to whoever moved last.
    assert set(np.unique(np.asarray(r)[np.asarray(done)])) <= {-1.0, 1.0}
  a = genv.action_space(params).sample(jax.random.PRNGKey(0))
  assert 0 <= int(a) < ours.num_actions
