"""Nannon rules on hand-built positions: primes, hits, own checkers, bearing
off, forfeits, winning, the opening roll, observations and parameters."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import nannon
from envs.nannon import state_at


@pytest.fixture(scope="module")
def env():
  return envs.make("nannon")


@pytest.fixture(scope="module")
def step(env):
  return jax.jit(env.step)


def legal(state):
  return [int(a) for a in np.nonzero(np.asarray(state.legal_action_mask))[0]]


def board_of(state):
  """(player 0's spots, player 1's spots, HOME counts) of a State or NannonState."""
  g = getattr(state, "game", state)
  b = np.asarray(g.board)
  return (
    [s + 1 for s in np.nonzero(b[0])[0]],
    [s + 1 for s in np.nonzero(b[1])[0]],
    [int(h) for h in np.asarray(g.home)],
  )


def test_defaults_and_sizes(env):
  assert env.params == {"points": 6, "checkers": 3, "die_sides": 6, "start": "1,2"}
  assert env.num_actions == 7
  assert env.num_chance_outcomes == 16  # 6 rolls + 2 x 5 opening outcomes
  assert env.observation_shape == (2 * 6 + 4 * 4 + 6 + 2,)
  big = envs.make("nannon", points=12, checkers=5)
  assert big.num_actions == 13 and big.observation_shape == (24 + 24 + 6 + 2,)


def test_start_position(env):
  s = env.init(jax.random.PRNGKey(0))
  assert int(s.current_player) == envs.CHANCE
  assert board_of(s) == ([1, 2], [1, 2], [1, 1])
  g = envs.make("nannon", points=12, checkers=5, start="1,2,4").game
  assert board_of(g.init(None)) == ([1, 2, 4], [1, 2, 4], [2, 2])
  g = envs.make("nannon", start="").game
  assert board_of(g.init(None)) == ([], [], [3, 3])


@pytest.mark.parametrize("d", [6, 3])
def test_opening_roll_distribution(d):
  env = envs.make("nannon", die_sides=d)
  s = env.init(jax.random.PRNGKey(0))
  probs = np.asarray(s.chance_probs, np.float64)
  assert probs.shape == (3 * d - 2,)
  assert not probs[:d].any()  # die-roll outcomes are impossible here
  np.testing.assert_allclose(probs.sum(), 1.0, atol=1e-6)
  outcomes = np.arange(d, 3 * d - 2)
  after = jax.jit(jax.vmap(env.step, in_axes=(None, 0)))(s, jnp.asarray(outcomes))
  for o in outcomes:
    starter, m = (o - d) // (d - 1), (o - d) % (d - 1) + 1
    # Both throw a uniform die; the higher moves the difference; ties re-roll.
    want = sum(1 for a in range(1, d + 1) for b in range(1, d + 1) if a - b == m) / (d * (d - 1))
    np.testing.assert_allclose(probs[o], want, rtol=1e-6)
    assert int(after.current_player[o - d]) == starter
    assert int(after.game.die[o - d]) == m
    assert int(after.step_count[o - d]) == 1
  np.testing.assert_allclose(probs[d : 2 * d - 1].sum(), 0.5, atol=1e-6)


def test_roll_node_is_uniform(env, step):
  s = state_at(env, [1, 2], [1, 2], home=(1, 1), mover=1)
  assert int(s.current_player) == envs.CHANCE
  p = np.asarray(s.chance_probs)
  np.testing.assert_allclose(p[:6], 1 / 6, rtol=1e-6)
  assert not p[6:].any()
  s2 = step(s, 3)  # a roll of 4
  assert int(s2.current_player) == 1 and int(s2.game.die) == 4


def test_prime_blocks_a_hit(env, step):
  # Player 0 on spot 1, roll 3 -> spot 4. Player 1 on its spots 3 and 2 are
  # player 0's spots 4 and 5: adjacent, a prime.
  s = state_at(env, [1], [3, 2], home=(2, 1), die=3)
  assert 1 not in legal(s)
  assert legal(s) == [0]  # entering from HOME to spot 3 is still legal
  # The same checker is hittable when its neighbour is not adjacent (spot 6
  # of player 0 is player 1's spot 1).
  s = state_at(env, [1], [3, 1], home=(2, 1), die=3)
  assert 1 in legal(s)
  # A prime does not block passing over it: spot 1 with a 5 jumps 4, 5.
  s = state_at(env, [1], [3, 2], home=(2, 1), die=5)
  assert 1 in legal(s)


def test_hit_sends_checker_home(env, step):
  s = state_at(env, [1], [3, 1], home=(2, 1), die=3)
  s2 = step(s, 1)
  mine, theirs, home = board_of(s2)
  assert mine == [4] and theirs == [1] and home == [2, 2]
  assert int(s2.current_player) == envs.CHANCE and int(s2.game.mover) == 1
  np.testing.assert_array_equal(np.asarray(s2.rewards), [0.0, 0.0])


def test_no_landing_on_own_checker(env):
  s = state_at(env, [1, 4], [], home=(1, 3), die=3)
  assert 1 not in legal(s) and legal(s) == [0, 4]
  s = state_at(env, [1, 4], [], home=(1, 3), die=1)
  assert 0 not in legal(s)  # HOME -> spot 1 is taken
  assert legal(s) == [1, 4]


def test_bear_off_with_high_roll(env, step):
  for die in (2, 5, 6):  # from spot 5 anything above 1 exits
    s = state_at(env, [5], [], home=(1, 3), die=die)
    assert 5 in legal(s)
    s2 = step(s, 5)
    mine, _, home = board_of(s2)
    assert mine == [] and home == [1, 3]  # one checker now in SAFETY
    assert int(s2.game.mover) == 1 and int(s2.current_player) == envs.CHANCE
  s = state_at(env, [5], [], home=(1, 3), die=1)
  assert board_of(step(s, 5))[0] == [6]


def test_forfeited_turn(env, step):
  # Player 0 has only HOME checkers; player 1 holds a prime on player 0's
  # spots 2, 3 (its spots 5, 4): rolls 2 and 3 have no legal move.
  s = state_at(env, [], [5, 4], home=(3, 1), mover=0)
  for roll in (2, 3):
    with pytest.raises(ValueError, match="forfeited"):
      state_at(env, [], [5, 4], home=(3, 1), mover=0, die=roll)
    s2 = step(s, roll - 1)
    assert int(s2.current_player) == envs.CHANCE  # the other player's roll
    assert int(s2.game.mover) == 1 and int(s2.game.die) == 0
    assert board_of(s2) == board_of(s)
    np.testing.assert_allclose(np.asarray(s2.chance_probs)[:6], 1 / 6, rtol=1e-6)
    assert float(s2.observation[-2]) == 1.0  # player 1's view: its turn
  s2 = step(s, 0)  # a roll of 1 enters
  assert int(s2.current_player) == 0 and legal(s2) == [0]


def test_last_checker_off_wins(env, step):
  s = state_at(env, [6], [2], home=(0, 0), mover=0, die=1)
  s2 = step(s, 6)
  assert bool(s2.terminated) and int(s2.current_player) == envs.TERMINAL
  np.testing.assert_array_equal(np.asarray(s2.rewards), [1.0, -1.0])
  s = state_at(env, [2], [6], home=(0, 0), mover=1, die=4)
  s2 = step(s, 6)
  np.testing.assert_array_equal(np.asarray(s2.rewards), [-1.0, 1.0])
  # Not the last checker: the game goes on.
  s = state_at(env, [6], [2], home=(1, 0), mover=0, die=1)
  assert not bool(step(s, 6).terminated)


def test_observation_is_from_the_movers_view(env):
  a = state_at(env, [1, 4], [2], home=(1, 1), mover=0, die=3)
  b = state_at(env, [2], [1, 4], home=(1, 1), mover=1, die=3)
  np.testing.assert_array_equal(np.asarray(a.observation), np.asarray(b.observation))
  obs = np.asarray(a.observation)
  n, k, d = 6, 3, 6
  np.testing.assert_array_equal(obs[:n], [1, 0, 0, 1, 0, 0])
  np.testing.assert_array_equal(obs[n : 2 * n], [0, 0, 0, 0, 1, 0])  # their 2 = my 5
  o = 2 * n
  np.testing.assert_array_equal(obs[o : o + k + 1], [0, 1, 0, 0])  # my HOME 1
  np.testing.assert_array_equal(obs[o + 2 * (k + 1) : o + 3 * (k + 1)], [1, 0, 0, 0])
  np.testing.assert_array_equal(obs[o + 3 * (k + 1) : o + 4 * (k + 1)], [0, 1, 0, 0])
  die = obs[o + 4 * (k + 1) : o + 4 * (k + 1) + d]
  np.testing.assert_array_equal(die, [0, 0, 1, 0, 0, 0])
  assert obs[-2] == 1.0 and obs[-1] == 0.0
  other = np.asarray(env.observe(a, 1))
  assert other[-2] == 0.0
  assert np.asarray(env.init(jax.random.PRNGKey(0)).observation)[-1] == 1.0


# 8 points; 24 points (the largest board, the spots as bits fill 25 of 32)
# with a 30-sided die (moves that reach past bit 31).
@pytest.mark.parametrize("n,sides", [(8, 6), (24, 30)])
def test_legal_moves_match_brute_force(n, sides):
  """`legal_moves` against a direct reading of the rules, on random boards."""
  rng = np.random.default_rng(n)
  fn = jax.jit(jax.vmap(nannon.legal_moves))
  cells = rng.integers(0, 3, (500, n))  # 0 empty, 1 mine, 2 theirs
  home = rng.integers(0, 2, 500)
  roll = rng.integers(1, sides + 1, 500)
  got = np.asarray(
    fn(jnp.asarray(cells == 1), jnp.asarray(cells == 2), jnp.asarray(home), jnp.asarray(roll))
  )
  for b in range(500):
    c = list(cells[b])
    for src in range(n + 1):
      has = home[b] > 0 if src == 0 else c[src - 1] == 1
      dst = src + roll[b]
      if not has:
        ok = False
      elif dst > n:
        ok = True
      elif c[dst - 1] == 1:
        ok = False
      elif c[dst - 1] == 2:
        left = dst >= 2 and c[dst - 2] == 2
        right = dst <= n - 1 and c[dst] == 2
        ok = not (left or right)
      else:
        ok = True
      assert got[b, src] == ok, (c, home[b], roll[b], src)


def test_bad_params():
  with pytest.raises(ValueError, match="die_sides must be >= 2"):
    envs.make("nannon", die_sides=1)
  with pytest.raises(ValueError, match="checkers must be >= 1"):
    envs.make("nannon", checkers=0)
  with pytest.raises(ValueError, match="points must be in"):
    envs.make("nannon", points=1)
  with pytest.raises(ValueError, match="both sides on one spot"):
    envs.make("nannon", start="1,6")
  with pytest.raises(ValueError, match="comma-separated"):
    envs.make("nannon", start="one")
  with pytest.raises(ValueError, match="places 3 checkers"):
    envs.make("nannon", checkers=2, start="1,2,3")
  with pytest.raises(ValueError, match="must be of type str"):
    envs.make("nannon", start=12)


def test_illegal_action_message(env):
  s = state_at(env, [1, 4], [], home=(1, 3), die=3)
  with pytest.raises(ValueError, match=r"legal actions: 0 \(enter from HOME\)"):
    env.check_action(s, 1)


def test_render(env):
  s = state_at(env, [1, 4], [2], home=(1, 1), mover=0, die=3)
  text = env.render(s)
  assert "X X" not in text and "player 0 to move a 3" in text
  assert "X . . X O ." in text
