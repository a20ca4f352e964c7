"""Differential tests: `breakthrough` against OpenSpiel's `breakthrough`.

Our env plays thousands of random games at once (vmap inside one jitted scan);
OpenSpiel then replays the same actions in a Python loop. At every step of
every game the legal action sets, the current player, the board (OpenSpiel's
observation tensor), the rewards, the terminal time and the returns must be
identical. Actions are compared as integers: the encodings are the same.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.breakthrough import BLACK, WHITE
from envs.breakthrough_players import uniform_legal_action

pyspiel = pytest.importorskip("pyspiel")

NUM_GAMES = 2000


@functools.partial(jax.jit, static_argnums=(0, 2))
def _play(env, key, batch):
  """Random games, all from the start: per-step records with a leading time
  axis. `legal[t]` is the legal mask before `actions[t]`, bit-packed
  (little-endian) to keep 2,000 8x8 games small; `board[t]`, `player[t]`,
  `done[t]` describe the state after t + 1 actions; `rewards[t]` is the
  reward of action t."""
  k0, k1 = jax.random.split(key)
  s = jax.vmap(env.init)(jax.random.split(k0, batch))

  def body(s, k):
    a = uniform_legal_action(s.legal_action_mask, k)
    legal = jnp.packbits(s.legal_action_mask, axis=-1, bitorder="little")
    s2 = jax.vmap(env.step)(s, a)
    rec = dict(actions=a, legal=legal, board=s2.game.board,
               player=s2.current_player, done=s2.done,
               terminated=s2.terminated, truncated=s2.truncated,
               illegal=s2.illegal_action, rewards=s2.rewards)
    return s2, rec

  _, rec = jax.lax.scan(body, s, jax.random.split(k1, env.max_game_length))
  first = dict(board=s.game.board, player=s.current_player, done=s.done)
  return first, rec


def _openspiel_board(state, rows, columns):
  """int8 `[rows * columns]` board in our cell values from OpenSpiel's
  observation tensor (planes black, white, empty)."""
  t = np.asarray(state.observation_tensor(0), np.float32).reshape(3, -1)
  return (t[0] * BLACK + t[1] * WHITE).astype(np.int8)


def _check_against_openspiel(rows, columns, game_string, seed):
  env = envs.make("breakthrough", rows=rows, columns=columns)
  game = pyspiel.load_game(game_string)
  assert game.num_distinct_actions() == env.num_actions
  assert game.max_game_length() == env.max_game_length
  assert list(game.observation_tensor_shape()) == [3, rows, columns]
  first, rec = jax.device_get(_play(env, jax.random.key(seed), NUM_GAMES))
  rec = {k: np.asarray(v) for k, v in rec.items()}
  assert not rec["truncated"].any() and not rec["illegal"].any()
  # Every game ends within max_game_length, by its rules.
  assert rec["terminated"][-1].all()
  lengths = np.argmax(rec["done"], axis=0) + 1  # actions played
  assert not first["done"].any()
  np.testing.assert_array_equal(first["player"], 0)

  for i in range(NUM_GAMES):
    legal_sets = np.unpackbits(rec["legal"][:lengths[i], i], axis=-1,
                               count=env.num_actions, bitorder="little")
    state = game.new_initial_state()
    np.testing.assert_array_equal(_openspiel_board(state, rows, columns),
                                  first["board"][i])
    for t in range(lengths[i]):
      ours = np.flatnonzero(legal_sets[t]).tolist()
      assert ours == sorted(state.legal_actions()), (i, t, str(state))
      state.apply_action(int(rec["actions"][t, i]))
      assert state.rewards() == rec["rewards"][t, i].tolist(), (i, t)
      board = _openspiel_board(state, rows, columns)
      assert np.array_equal(board, rec["board"][t, i]), (i, t, str(state))
      assert state.is_terminal() == (t == lengths[i] - 1), (i, t, str(state))
      if not state.is_terminal():
        assert state.current_player() == rec["player"][t, i]
    assert state.returns() == rec["rewards"][:lengths[i], i].sum(0).tolist()
  return lengths


def test_matches_openspiel_5x5():
  lengths = _check_against_openspiel(5, 5, "breakthrough(rows=5,columns=5)", 0)
  assert lengths.min() < lengths.max()  # the games differ


def test_matches_openspiel_8x8():
  lengths = _check_against_openspiel(8, 8, "breakthrough", 1)
  assert lengths.min() < lengths.max()


def test_observation_matches_openspiel_tensor():
  """Planes 0-2 are OpenSpiel's tensor (black, white, empty) channels-last for
  player 0, with black and white swapped for player 1; plane 3 marks black."""
  env = envs.make("breakthrough", rows=6, columns=4)
  game = pyspiel.load_game("breakthrough(rows=6,columns=4)")
  step = jax.jit(env.step)
  observe = jax.jit(env.observe)
  rng = np.random.default_rng(0)
  for _ in range(5):
    s = env.init(jax.random.key(0))
    state = game.new_initial_state()
    while not state.is_terminal():
      t = np.asarray(state.observation_tensor(0), np.float32).reshape(3, 6, 4)
      t = np.moveaxis(t, 0, -1)
      for p in (0, 1):
        ours = np.asarray(observe(s, p))
        planes = t[..., [1, 0, 2]] if p else t
        np.testing.assert_array_equal(ours[..., :3], planes)
        np.testing.assert_array_equal(ours[..., 3], float(p == 0))
      np.testing.assert_array_equal(
          np.asarray(s.observation), np.asarray(observe(s, state.current_player())))
      a = int(rng.choice(state.legal_actions()))
      state.apply_action(a)
      s = step(s, a)
    assert bool(s.terminated)
