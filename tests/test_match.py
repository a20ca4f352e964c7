"""The match loop (`anakin_mz.eval.match.play_match`) calls the policies only
where a move is made: the chance that follows a move is sampled by the keyed
`Env.step`, so no call finds an unfinished game at a chance node, every call
moves some game, and the calls are exactly the longest game's moves. Its
scores against the exact win probability are in `test_nannon_solver.py`, its
keys in `test_key_flavours.py`."""

import jax
import numpy as np
import pytest

import envs
from anakin_mz.eval import match

_GAMES = 64


def _recorded_match(env, num_games, seed=0):
  """Plays random against random, recording for each batched agent call
  which lanes are at a chance node and which are making a move."""
  calls = []

  def agent(state, key):
    live = ~state.done
    at_chance = live & (state.current_player == envs.CHANCE)
    moving = live & (state.current_player >= 0)
    jax.debug.callback(lambda c, m: calls.append((c, m)), at_chance, moving, ordered=True)
    return envs.random_policy(state, key)

  res = jax.jit(lambda k: match.play_match(env, agent, envs.random_policy, k, num_games))(
    jax.random.PRNGKey(seed)
  )
  jax.block_until_ready(res.score)
  at_chance = np.stack([np.asarray(c) for c, _ in calls])
  moving = np.stack([np.asarray(m) for _, m in calls])
  return res, at_chance, moving


@pytest.mark.parametrize("game", ["nannon", "einstein", "catch", "carchess"])
def test_the_policies_are_called_only_where_a_move_is_made(game):
  env = envs.make(game)
  res, at_chance, moving = _recorded_match(env, _GAMES)
  assert not at_chance.any()  # no call waits on a chance node
  assert moving.any(axis=1).all()  # every call moves some game
  moves = moving.sum(axis=0)  # [G] each game's moves
  assert len(moving) == moves.max()  # the calls: the longest game's moves
  # Every game ended, and its transitions count the chance nodes sampled
  # between its moves: more than its moves wherever chance follows a move.
  assert not np.asarray(res.truncated).any()
  length = np.asarray(res.length)
  assert np.all(length >= moves)
  if game in ("nannon", "einstein"):  # a roll before every move
    assert np.all(length >= 2 * moves - 1)


def test_a_game_without_chance_plays_one_transition_a_call():
  env = envs.make("breakthrough")
  res, at_chance, moving = _recorded_match(env, 16)
  assert not at_chance.any()
  np.testing.assert_array_equal(np.asarray(res.length), moving.sum(axis=0))


def test_every_game_is_scored_once_and_the_agent_takes_each_seat_in_turn():
  """A win or a loss counts once (the rewards of the move and of the chance
  after it are summed by the keyed step, never again from a finished game)."""
  env = envs.make("nannon")
  res = jax.jit(lambda k: match.play_match(env, envs.random_policy, envs.random_policy, k, _GAMES))(
    jax.random.PRNGKey(3)
  )
  np.testing.assert_array_equal(np.asarray(res.agent_seat), np.arange(_GAMES) % 2)
  score = np.asarray(res.score)
  assert set(np.unique(score)) == {-1.0, 1.0}
