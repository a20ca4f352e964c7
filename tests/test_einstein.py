"""Rules of `einstein` on hand-built positions, its encodings, and the
reference opponents (the OpenSpiel differential test is in
`test_einstein_openspiel.py`)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import einstein
from envs.core import CHANCE, TERMINAL
from envs.einstein import position
from envs.bots.einstein import expectiminimax_values, make_expectiminimax_policy

ENV = envs.make("einstein")
GAME = ENV.game
apply_action = jax.jit(GAME.apply_action)
legal_mask = jax.jit(GAME.legal_action_mask)
selectable = jax.jit(einstein.selectable)


def moves(g):
  """The legal moves of `g` by name, e.g. {"b2-down", "b5-diag"}."""
  names = [GAME.action_to_string(g, int(a)) for a in np.flatnonzero(legal_mask(g))]
  return {n.split()[0] for n in names}


def action_named(g, name):
  """The legal action whose name starts with `name` (e.g. "b4-diag")."""
  for a in np.flatnonzero(legal_mask(g)):
    if GAME.action_to_string(g, int(a)).split()[0] == name:
      return jnp.int32(a)
  raise AssertionError(f"{name} is not legal; legal: {moves(g)}")


@functools.lru_cache(maxsize=None)
def emm_policy(depth):
  """The jitted expectiminimax policy (compiled once per depth)."""
  return jax.jit(make_expectiminimax_policy(ENV, depth=depth))


def batch_of_one(g):
  """A batch of one env `State` around a hand-built game state."""
  return jax.tree.map(lambda x: x[None], env_state(g))


@jax.jit
def env_state(g):
  """An env `State` around a hand-built game state."""
  return ENV._make_state(
    g, rewards=jnp.zeros((2,), jnp.float32), step_count=jnp.int32(0), illegal=jnp.bool_(False)
  )


def squares(g, side):
  return {k + 1: divmod(int(sq), 5) for k, sq in enumerate(np.asarray(g.pos[side])) if sq >= 0}


# Choice of the piece to move.


@pytest.mark.parametrize(
  "face, expected",
  [
    (3, {2, 5}),  # piece 3 gone: nearest lower 2 and nearest higher 5
    (4, {2, 5}),
    (1, {2}),  # no lower piece
    (6, {5}),  # no higher piece
    (2, {2}),  # the named piece is on the board
    (5, {5}),
  ],
)
def test_die_selects_named_or_nearest_pieces(face, expected):
  g = position(black={2: (0, 0), 5: (2, 2)}, white={1: (4, 4)}, to_move=0, die=face)
  movers = {int(m[1]) for m in moves(g)}
  assert movers == expected
  sel = np.flatnonzero(np.asarray(selectable(g.pos[0], jnp.int32(face - 1))))
  assert set(sel + 1) == expected


def test_mover_chooses_between_lower_and_higher():
  g = position(black={1: (1, 0), 6: (0, 3)}, white={2: (4, 4)}, to_move=0, die=3)
  assert moves(g) == {"b1-diag", "b1-down", "b1-right", "b6-diag", "b6-down", "b6-right"}
  g = position(black={6: (0, 3)}, white={1: (3, 1), 4: (4, 4), 5: (2, 2)}, to_move=1, die=3)
  assert moves(g) == {"w1-diag", "w1-up", "w1-left", "w4-diag", "w4-up", "w4-left"}


def test_moves_stay_on_the_board_and_go_toward_the_corner():
  g = position(black={1: (4, 1)}, white={1: (0, 4)}, to_move=0, die=1)
  assert moves(g) == {"b1-right"}
  g = position(black={1: (1, 4)}, white={1: (0, 0)}, to_move=0, die=1)
  assert moves(g) == {"b1-down"}
  g = position(black={1: (4, 3)}, white={1: (0, 4)}, to_move=1, die=1)
  assert moves(g) == {"w1-left"}


# Captures and wins.


def test_capture_own_piece():
  g = position(
    black={1: (1, 1), 2: (2, 2), 3: (0, 0)}, white={1: (4, 0), 2: (0, 4)}, to_move=0, die=1
  )
  g2, rewards = apply_action(g, action_named(g, "b1-diag"))
  assert squares(g2, 0) == {1: (2, 2), 3: (0, 0)}
  assert squares(g2, 1) == squares(g, 1)
  assert int(GAME.current_player(g2)) == CHANCE and int(g2.to_move) == 1
  np.testing.assert_array_equal(rewards, [0.0, 0.0])


def test_capture_enemy_piece_game_goes_on():
  g = position(black={3: (2, 2)}, white={1: (3, 3), 2: (4, 0)}, to_move=0, die=3)
  g2, rewards = apply_action(g, action_named(g, "b3-diag"))
  assert squares(g2, 0) == {3: (3, 3)} and squares(g2, 1) == {2: (4, 0)}
  assert int(g2.winner) == -1
  np.testing.assert_array_equal(rewards, [0.0, 0.0])


@pytest.mark.parametrize("side", [0, 1])
def test_win_by_reaching_the_corner(side):
  if side == 0:
    g = position(black={4: (3, 3)}, white={1: (0, 4), 2: (4, 0)}, to_move=0, die=4)
    win, other = "b4-diag", "b4-down"
  else:
    g = position(black={1: (0, 4), 2: (4, 0)}, white={4: (1, 1)}, to_move=1, die=4)
    win, other = "w4-diag", "w4-up"
  g2, rewards = apply_action(g, action_named(g, win))
  assert int(GAME.current_player(g2)) == TERMINAL and int(g2.winner) == side
  np.testing.assert_array_equal(rewards, np.where(np.arange(2) == side, 1.0, -1.0))
  g3, rewards = apply_action(g, action_named(g, other))
  assert int(GAME.current_player(g3)) == CHANCE
  np.testing.assert_array_equal(rewards, [0.0, 0.0])


@pytest.mark.parametrize("side", [0, 1])
def test_win_by_capturing_the_last_enemy_piece(side):
  if side == 0:
    g = position(black={3: (1, 1), 6: (0, 0)}, white={5: (2, 2)}, to_move=0, die=3)
    name = "b3-diag"
  else:
    g = position(black={2: (2, 2)}, white={1: (3, 3), 6: (4, 4)}, to_move=1, die=1)
    name = "w1-diag"
  g2, rewards = apply_action(g, action_named(g, name))
  assert not squares(g2, 1 - side)
  assert int(GAME.current_player(g2)) == TERMINAL and int(g2.winner) == side
  np.testing.assert_array_equal(rewards, np.where(np.arange(2) == side, 1.0, -1.0))


# Setup, chance and encodings.


def test_standard_layout_and_first_turn():
  env = envs.make("einstein", placement="standard")
  s = jax.jit(env.init)(jax.random.PRNGKey(0))
  assert squares(s.game, 0) == {1: (0, 0), 2: (0, 1), 3: (0, 2), 4: (1, 0), 5: (1, 1), 6: (2, 0)}
  assert squares(s.game, 1) == {1: (4, 4), 2: (4, 3), 3: (4, 2), 4: (3, 4), 5: (3, 3), 6: (2, 4)}
  # Player 1 moves first, after a fair die.
  assert int(s.current_player) == CHANCE
  np.testing.assert_allclose(s.chance_probs, np.full(6, 1 / 6), rtol=1e-6)
  s = jax.jit(env.step)(s, jnp.int32(2))  # face 3
  assert int(s.current_player) == 1
  assert moves(s.game) == {"w3-diag", "w3-up", "w3-left"}
  # OpenSpiel ids ((5 row + col) * 6 + direction) * 2 + capture, piece at (4, 2).
  to_os = jax.jit(einstein.to_openspiel_action)
  os_ids = {int(to_os(s.game, jnp.int32(a))) for a in np.flatnonzero(s.legal_action_mask)}
  assert os_ids == {((5 * 4 + 2) * 6 + d) * 2 for d in (3, 4, 5)}


def test_random_layouts_are_permutations_on_the_start_squares():
  states = jax.jit(jax.vmap(ENV.init))(jax.random.split(jax.random.PRNGKey(1), 64))
  start = {
    0: {(r, c) for r in range(5) for c in range(5) if r + c <= 2},
    1: {(r, c) for r in range(5) for c in range(5) if r + c >= 6},
  }
  layouts = set()
  for i in range(64):
    g = jax.tree.map(lambda x, i=i: x[i], states.game)
    for side in (0, 1):
      sq = squares(g, side)
      assert set(sq) == set(range(1, 7)) and set(sq.values()) == start[side]
    layouts.add(tuple(np.asarray(g.pos).ravel()))
  assert len(layouts) > 32  # 720**2 layouts: repeats are rare


def test_chance_placement_nodes():
  env = envs.make("einstein", placement="chance")
  assert env.num_chance_outcomes == 720
  s = env.init(jax.random.PRNGKey(0))
  step = jax.jit(env.step)
  for outcome in (0, 719):
    assert int(s.current_player) == CHANCE
    np.testing.assert_allclose(s.chance_probs, np.full(720, 1 / 720), rtol=1e-6)
    s = step(s, jnp.int32(outcome))
  std = envs.make("einstein", placement="standard").init(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(s.game.pos, std.game.pos)
  # Then only the die: outcomes 0..5.
  assert int(s.current_player) == CHANCE
  assert np.flatnonzero(s.chance_probs).tolist() == list(range(6))
  with pytest.raises(ValueError, match="impossible"):
    env.check_action(s, 6)


def test_observation_is_from_the_movers_view():
  black = {1: (0, 0), 2: (0, 1), 3: (0, 2), 4: (1, 0), 5: (1, 1), 6: (2, 0)}
  white = {k: (4 - r, 4 - c) for k, (r, c) in black.items()}
  del white[2]  # break the symmetry
  # The same position turned by 180 degrees with the colours swapped.
  flipped_black = {k: (4 - r, 4 - c) for k, (r, c) in white.items()}
  flipped_white = {k: (4 - r, 4 - c) for k, (r, c) in black.items()}
  a = GAME.observe(position(black, white, to_move=1, die=2), jnp.int32(1))
  b = GAME.observe(position(flipped_black, flipped_white, to_move=0, die=2), jnp.int32(0))
  np.testing.assert_array_equal(a, b)
  assert a.shape == (5, 5, 19) and a.dtype == jnp.float32
  # Mover's piece 1 sits in the view's corner (0, 0); piece 2 is gone, so face
  # 2 lets pieces 1 and 3 move.
  assert a[0, 0, 0] == 1 and not a[..., 1].any()
  np.testing.assert_array_equal(a[..., 12 + 1], 1.0)
  assert a[..., 18].sum() == 2 and a[0, 0, 18] == 1 and a[0, 2, 18] == 1
  # Before the roll the die planes are empty.
  c = GAME.observe(position(black, white, to_move=1), jnp.int32(1))
  assert not c[..., 12:].any()


def test_openspiel_bijection_round_trips():
  g = position(
    black={1: (0, 0), 4: (1, 1), 6: (3, 2)}, white={2: (1, 2), 5: (4, 4)}, to_move=0, die=5
  )
  for a in np.flatnonzero(legal_mask(g)):
    os_a = einstein.to_openspiel_action(g, jnp.int32(a))
    assert int(einstein.from_openspiel_action(g, os_a)) == a
  # b4 (1, 1) -> (1, 2) captures: capture bit set; direction 2 (right).
  a = action_named(g, "b4-right")
  assert int(einstein.to_openspiel_action(g, a)) == ((5 * 1 + 1) * 6 + 2) * 2 + 1


def test_render_shows_piece_numbers():
  text = ENV.render(env_state(position(black={3: (0, 0)}, white={5: (4, 4)}, to_move=0, die=6)))
  assert "b3" in text and "w5" in text and "die 6" in text and "player 0" in text


def test_bad_params_and_positions():
  with pytest.raises(ValueError, match="placement must be one of"):
    envs.make("einstein", placement="mirror")
  with pytest.raises(ValueError, match="two pieces"):
    position(black={1: (0, 0)}, white={1: (0, 0)}, to_move=0)
  with pytest.raises(ValueError, match="piece numbers"):
    position(black={7: (0, 0)}, white={}, to_move=0)
  with pytest.raises(ValueError, match="depth"):
    make_expectiminimax_policy(ENV, depth=0)


# Opponents.


def test_random_policy_plays_legal_moves_and_chance():
  policy = jax.jit(envs.random_policy)
  s = jax.jit(jax.vmap(ENV.init))(jax.random.split(jax.random.PRNGKey(0), 8))
  a = jax.jit(envs.chance_outcome)(s, jax.random.PRNGKey(1))
  assert np.all((0 <= a) & (a < 6))  # die outcomes at the first chance node
  s = jax.jit(jax.vmap(ENV.step))(s, a)
  a = policy(s, jax.random.PRNGKey(2))
  assert np.all(np.asarray(s.legal_action_mask)[np.arange(8), np.asarray(a)])


def test_expectiminimax_takes_a_win():
  g = position(black={4: (3, 3), 5: (0, 0)}, white={1: (0, 4), 2: (4, 0)}, to_move=0, die=4)
  a = emm_policy(2)(batch_of_one(g), jax.random.PRNGKey(0))
  assert GAME.action_to_string(g, int(a[0])).startswith("b4-diag")


def test_expectiminimax_averages_the_die():
  # White w1 at (1, 1) wins on faces 1..5 (faces 2..5 give the choice of w1);
  # face 6 moves w6 only. Black may capture w1 with b2 (down from (0, 1)).
  g = position(black={2: (0, 1), 5: (2, 3)}, white={1: (1, 1), 6: (4, 0)}, to_move=0, die=2)
  no_eval = lambda h, p: jnp.float32(0.0)
  search = jax.jit(lambda h: expectiminimax_values(GAME, h, 2, no_eval))
  actions, valid, values = search(g)
  got = {
    GAME.action_to_string(g, int(a)).split()[0]: float(v)
    for a, ok, v in zip(actions, valid, values)
    if ok
  }
  assert set(got) == {"b2-diag", "b2-down", "b2-right"}
  np.testing.assert_allclose(got["b2-diag"], -5 / 6, rtol=1e-6)
  np.testing.assert_allclose(got["b2-right"], -5 / 6, rtol=1e-6)
  np.testing.assert_allclose(got["b2-down"], 0.0, atol=1e-7)
  a = emm_policy(2)(batch_of_one(g), jax.random.PRNGKey(0))
  assert GAME.action_to_string(g, int(a[0])).startswith("b2-down")
