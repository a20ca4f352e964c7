"""The match loop (`anakin_mz.eval.match.play_match`) calls the policies only
where a move is made: the chance that follows a move is sampled by the keyed
`Env.step`, so no call finds an unfinished game at a chance node. In
zero-sum games each policy is called on its share of the lanes (half, in a
two-player game), those of the games where it is to move (`take_lanes`):
each lane's moves are its own policy's (an exact game without chance), and
the loop takes no more iterations than the longest game's moves plus one
where the players alternate. Its scores against the exact win probability
are in `test_nannon_solver.py`, its keys in `test_key_flavours.py`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz.eval import match

_GAMES = 64


def _recorded_match(env, num_games, seed=0):
  """Plays random against random, recording for each batched call of the
  policy under test its lanes' count and which of them hold an unfinished
  game at a chance node."""
  calls = []

  def policy(state, key):
    at_chance = ~state.done & (state.current_player == envs.CHANCE)
    jax.debug.callback(lambda c: calls.append(np.asarray(c)), at_chance, ordered=True)
    return envs.random_policy(state, key)

  res = jax.jit(lambda k: match.play_match(env, policy, envs.random_policy, k, num_games))(
    jax.random.PRNGKey(seed)
  )
  jax.block_until_ready(res.score)
  return res, calls


def test_take_lanes_gives_the_wanting_lanes_first_lowest_first():
  want = np.array([False, True, False, True, True, False])
  for size, lanes, served in (
    (2, [1, 3], [0, 1, 0, 1, 0, 0]),  # lane 4 waits
    (3, [1, 3, 4], [0, 1, 0, 1, 1, 0]),
    (5, [1, 3, 4, 0, 2], [0, 1, 0, 1, 1, 0]),  # filled with lanes that do not want it
  ):
    got_lanes, got_served = match.take_lanes(jnp.asarray(want), size)
    np.testing.assert_array_equal(got_lanes, lanes)
    np.testing.assert_array_equal(got_served, np.asarray(served, bool))
  lanes, served = match.take_lanes(jnp.zeros(4, bool), 2)
  np.testing.assert_array_equal(lanes, [0, 1])
  assert not np.asarray(served).any()


@pytest.mark.parametrize(
  "game, lanes", [("nannon", _GAMES // 2), ("einstein", _GAMES // 2), ("catch", _GAMES),
                  ("carchess", _GAMES)],
)  # fmt: skip
def test_the_policies_are_called_only_where_a_move_is_made(game, lanes):
  """Zero-sum: the policy under test gets half the lanes; one player or collaborative:
  all of them. No call finds an unfinished game at a chance node, and every
  game ends; its transitions count the chance nodes sampled between moves."""
  env = envs.make(game)
  res, calls = _recorded_match(env, _GAMES)
  assert {len(c) for c in calls} == {lanes}
  assert not np.stack(calls).any()  # no call waits on a chance node
  assert not np.asarray(res.truncated).any()
  length = np.asarray(res.length)
  if game == "einstein":  # strict turns, a roll before every move: <= (length + 1) / 2
    assert len(calls) <= np.max((length + 1) // 2) + 1  # moves, and one wait at most


def _first_legal(state, key):
  return jnp.argmax(state.legal_action_mask, axis=-1)


def _last_legal(state, key):
  n = state.legal_action_mask.shape[-1]
  return n - 1 - jnp.argmax(state.legal_action_mask[..., ::-1], axis=-1)


@pytest.mark.parametrize("num_games", [16, 15])
def test_each_lane_plays_its_own_policies_moves(num_games):
  """Breakthrough has no chance, so first-legal against last-legal is one
  game per seat: every lane of the match is that game, played move by move
  here without the loop; and with strict turns and every game starting with
  the same player, no game waits (one call per move of the longest game)."""
  env, calls = envs.make("breakthrough"), []

  def policy(state, key):
    jax.debug.callback(lambda: calls.append(1), ordered=True)
    return _first_legal(state, key)

  def reference(policy_seat):
    state, score = env.reset(jax.random.PRNGKey(0)), 0.0
    while not bool(state.done):
      mover = _first_legal if int(state.current_player) == policy_seat else _last_legal
      state = env.step(state, mover(state, None))
      score += float(state.rewards[policy_seat])
    return score, int(state.step_count)

  res = jax.jit(lambda k: match.play_match(env, policy, _last_legal, k, num_games))(
    jax.random.PRNGKey(1)
  )
  want = [reference(seat) for seat in (0, 1)]
  assert want[0][0] != want[1][0] or want[0][1] != want[1][1]  # the seats tell apart
  for lane in range(num_games):
    got = (float(res.score[lane]), int(res.length[lane]))
    assert got == want[lane % 2], (lane, got, want)
  assert len(calls) == max(n for _, n in want)


def test_every_game_is_scored_once_and_the_policy_takes_each_seat_in_turn():
  """A win or a loss counts once (the rewards of the move and of the chance
  after it are summed by the keyed step, never again from a finished game)."""
  env = envs.make("nannon")
  res = jax.jit(lambda k: match.play_match(env, envs.random_policy, envs.random_policy, k, _GAMES))(
    jax.random.PRNGKey(3)
  )
  np.testing.assert_array_equal(np.asarray(res.policy_seat), np.arange(_GAMES) % 2)
  score = np.asarray(res.score)
  assert set(np.unique(score)) == {-1.0, 1.0}
