"""Differential tests: `breakthrough` against OpenSpiel's `breakthrough`.

Our env plays thousands of random games at once (vmap inside one jitted scan);
OpenSpiel then replays the same moves in a Python loop. At every step of
every game the legal action sets, the current player, the board (OpenSpiel's
observation tensor), the rewards, the terminal time and the returns must be
identical.

Our actions are canonical (the mover's frame, board turned 180 degrees for
white, no capture bit) and OpenSpiel's are absolute, so actions are matched
twice: through the env's own `to_openspiel_action` / `from_openspiel_action`
(every legal action of every step, and the move played), and through a
mapping written here from OpenSpiel's documented encoding, independently of
`envs.breakthrough`.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs.breakthrough import BLACK, WHITE, from_openspiel_action, to_openspiel_action
from envs.policy import legal_slots, random_legal_action

pyspiel = pytest.importorskip("pyspiel")

# Long programs (thousands of games, or searches), not long compiles: XLA's
# full optimisation (conftest.py).
pytestmark = pytest.mark.optimized

NUM_GAMES = 2000
# OpenSpiel's directions (dr, dc): 0..2 black's, 3..5 white's.
OS_OFFSETS = ((1, -1), (1, 0), (1, 1), (-1, -1), (-1, 0), (-1, 1))


def ours_from_openspiel(os_action: int, rows: int, columns: int) -> int:
  """Our action id for an OpenSpiel action id (independent reimplementation:
  the mover's frame turns the board 180 degrees for white; our moves 0, 1, 2
  are (+1, -1), (+1, 0), (+1, +1) in that frame; the capture bit is dropped)."""
  rest, _capture = divmod(os_action, 2)
  square, direction = divmod(rest, 6)
  row, col = divmod(square, columns)
  dr, dc = OS_OFFSETS[direction]
  if direction >= 3:  # white: turn the board
    row, col, dr, dc = rows - 1 - row, columns - 1 - col, -dr, -dc
  assert dr == 1
  return (row * columns + col) * 3 + dc + 1


@functools.partial(jax.jit, static_argnums=(0, 2))
def _play(env, key, batch):
  """Random games, all from the start: per-step records with a leading time
  axis. Before action t: `legal[t]` is the legal mask, bit-packed
  (little-endian) to keep 2,000 8x8 games small; `os_legal[t]` the OpenSpiel
  ids (`to_openspiel_action`) of the legal actions, -1 padded; `os_action[t]`
  the OpenSpiel id of `actions[t]`; `round_trip[t]` whether
  `from_openspiel_action` inverts them all. `board[t]`, `player[t]`,
  `done[t]` describe the state after t + 1 actions; `rewards[t]` is the
  reward of action t."""
  k0, k1 = jax.random.split(key)
  s = jax.vmap(env.init)(jax.random.split(k0, batch))
  slots = env.game.max_legal_actions
  to_os = jax.vmap(jax.vmap(to_openspiel_action, (None, 0)))
  from_os = jax.vmap(jax.vmap(from_openspiel_action, (None, 0)))

  def body(s, k):
    a = random_legal_action(s.legal_action_mask, k)
    legal = jnp.packbits(s.legal_action_mask, axis=-1, bitorder="little")
    acts, valid = legal_slots(s.legal_action_mask, slots)
    os_legal = to_os(s.game, acts)
    round_trip = jnp.all((from_os(s.game, os_legal) == acts) | ~valid, -1)
    os_action = jax.vmap(to_openspiel_action)(s.game, a)
    s2 = jax.vmap(env.step)(s, a)
    rec = dict(
      actions=a,
      legal=legal,
      os_legal=jnp.where(valid, os_legal, -1).astype(jnp.int16),
      os_action=os_action,
      round_trip=round_trip | s.done,
      board=s2.game.board,
      player=s2.current_player,
      done=s2.done,
      terminated=s2.terminated,
      truncated=s2.truncated,
      illegal=s2.illegal_action,
      rewards=s2.rewards,
    )
    return s2, rec

  _, rec = jax.lax.scan(body, s, jax.random.split(k1, env.max_game_length))
  first = dict(board=s.game.board, player=s.current_player, done=s.done)
  return first, rec


def _openspiel_board(state):
  """int8 `[rows * columns]` absolute board in our cell values from
  OpenSpiel's observation tensor (planes black, white, empty)."""
  t = np.asarray(state.observation_tensor(0), np.float32).reshape(3, -1)
  return (t[0] * BLACK + t[1] * WHITE).astype(np.int8)


def _check_against_openspiel(rows, columns, game_string, seed):
  env = envs.make("breakthrough", rows=rows, columns=columns)
  game = pyspiel.load_game(game_string)
  assert game.num_distinct_actions() == 4 * env.num_actions
  assert env.num_actions == rows * columns * 3
  assert game.max_game_length() == env.max_game_length
  assert list(game.observation_tensor_shape()) == [3, rows, columns]
  ours = np.array(
    [ours_from_openspiel(a, rows, columns) for a in range(game.num_distinct_actions())]
  )
  first, rec = jax.device_get(_play(env, jax.random.PRNGKey(seed), NUM_GAMES))
  rec = {k: np.asarray(v) for k, v in rec.items()}
  assert not rec["truncated"].any() and not rec["illegal"].any()
  assert rec["round_trip"].all()
  # Every game ends within max_game_length, by its rules.
  assert rec["terminated"][-1].all()
  lengths = np.argmax(rec["done"], axis=0) + 1  # actions played
  assert not first["done"].any()
  np.testing.assert_array_equal(first["player"], 0)
  # The independent mapping agrees with the env's on every move played.
  played = np.arange(rec["actions"].shape[0])[:, None] < lengths
  np.testing.assert_array_equal(ours[rec["os_action"]][played], rec["actions"][played])

  for i in range(NUM_GAMES):
    legal_sets = np.unpackbits(
      rec["legal"][: lengths[i], i], axis=-1, count=env.num_actions, bitorder="little"
    )
    state = game.new_initial_state()
    np.testing.assert_array_equal(_openspiel_board(state), first["board"][i].reshape(-1))
    for t in range(lengths[i]):
      os_legal = sorted(state.legal_actions())
      converted = rec["os_legal"][t, i]
      assert sorted(converted[converted >= 0].tolist()) == os_legal, (i, t, str(state))
      assert np.flatnonzero(legal_sets[t]).tolist() == sorted(ours[os_legal].tolist()), (
        i,
        t,
        str(state),
      )
      os_action = int(rec["os_action"][t, i])
      state.apply_action(os_action)
      assert state.rewards() == rec["rewards"][t, i].tolist(), (i, t)
      board = _openspiel_board(state)
      assert np.array_equal(board, rec["board"][t, i].reshape(-1)), (i, t, str(state))
      assert state.is_terminal() == (t == lengths[i] - 1), (i, t, str(state))
      if not state.is_terminal():
        assert state.current_player() == rec["player"][t, i]
    assert state.returns() == rec["rewards"][: lengths[i], i].sum(0).tolist()
  return lengths


def test_matches_openspiel_5x5():
  lengths = _check_against_openspiel(5, 5, "breakthrough(rows=5,columns=5)", 0)
  assert lengths.min() < lengths.max()  # the games differ


def test_matches_openspiel_8x8():
  lengths = _check_against_openspiel(8, 8, "breakthrough", 1)
  assert lengths.min() < lengths.max()


def test_observation_and_names_match_openspiel():
  """For black the observation is OpenSpiel's tensor (black, white, empty)
  channels-last; for white its planes (white, black, empty) turned 180
  degrees. Move names and the action conversions agree with OpenSpiel's
  along games driven by OpenSpiel's random moves."""
  rows, columns = 6, 4
  env = envs.make("breakthrough", rows=rows, columns=columns)
  game = pyspiel.load_game(f"breakthrough(rows={rows},columns={columns})")
  step = jax.jit(env.step)
  observe = jax.jit(env.observe)
  to_os = jax.jit(to_openspiel_action)
  from_os = jax.jit(from_openspiel_action)
  rng = np.random.default_rng(0)
  for _ in range(5):
    s = env.init(jax.random.PRNGKey(0))
    state = game.new_initial_state()
    while not state.is_terminal():
      t = np.asarray(state.observation_tensor(0), np.float32).reshape(3, rows, columns)
      t = np.moveaxis(t, 0, -1)
      for p in (0, 1):
        planes = t[::-1, ::-1][..., [1, 0, 2]] if p else t
        np.testing.assert_array_equal(observe(s, p), planes)
      np.testing.assert_array_equal(
        np.asarray(s.observation), np.asarray(observe(s, state.current_player()))
      )
      legal = state.legal_actions()
      for os_a in legal:
        a = int(from_os(s.game, os_a))
        assert bool(s.legal_action_mask[a])
        assert int(to_os(s.game, a)) == os_a
        assert env.game.action_to_string(s.game, a) == state.action_to_string(os_a)
      assert int(s.legal_action_mask.sum()) == len(legal)
      os_a = int(rng.choice(legal))
      a = int(from_os(s.game, os_a))
      state.apply_action(os_a)
      s = step(s, a)
    assert bool(s.terminated)
    np.testing.assert_array_equal(s.rewards, state.rewards())
