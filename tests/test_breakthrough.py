"""Rules of `breakthrough` on hand-built positions, its canonical (mover's
frame) encoding, and its opponents.

Boards are written as in `render`: the top line is row 0 (black's home row,
rank `rows`), "b" black (player 0, moves down), "w" white (player 1, moves up).
Moves are named as OpenSpiel names them (`action_to_string`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import CHANCE, TERMINAL
from envs.breakthrough import (
  BLACK,
  EMPTY,
  WHITE,
  action_tables,
  from_openspiel_action,
  to_openspiel_action,
)
from envs.testing import random_playout
import envs.bots
from envs.bots.uct import mcts_policy, rollout_value
from envs.policy import legal_slots, random_legal_action


def _env(rows=5, columns=5):
  return envs.make("breakthrough", rows=rows, columns=columns)


def _state(env, picture, player):
  """An Env state from a picture (list of strings of '.', 'b', 'w') or an
  absolute board array of EMPTY/BLACK/WHITE."""
  cells = {".": EMPTY, "b": BLACK, "w": WHITE}
  if not isinstance(picture, np.ndarray):
    picture = [[cells[ch] for ch in line] for line in picture]
  g = env.game.from_board(picture, player)
  return env._make_state(
    g, rewards=jnp.zeros((2,), jnp.float32), step_count=jnp.int32(0), illegal=jnp.bool_(False)
  )


def _random_positions(env, key, batch, num_steps):
  """Game-core states (a pytree with leading axis N) of the decision nodes
  met in `batch` uniformly random games of at most `num_steps` moves."""

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, batch))

    def body(s, k):
      s2 = jax.vmap(env.step)(s, random_legal_action(s.legal_action_mask, k))
      return s2, (s.game, s.current_player >= 0)

    return jax.lax.scan(body, s, jax.random.split(k1, num_steps))[1]

  games, live = jax.device_get(run(key))
  live = np.asarray(live).reshape(-1)
  return jax.tree.map(lambda x: np.asarray(x).reshape((-1,) + x.shape[2:])[live], games)


def _legal_names(env, s):
  mask = np.asarray(s.legal_action_mask)
  return sorted(env.game.action_to_string(s.game, int(a)) for a in np.flatnonzero(mask))


def _act(env, s, name):
  for a in range(env.num_actions):
    if env.game.action_to_string(s.game, a) == name:
      return env.checked_step(s, a)
  raise AssertionError(f"no action named {name}")


def test_defaults_and_sizes():
  env = envs.make("breakthrough")
  assert env.params == {"rows": 5, "columns": 5}
  assert env.num_players == 2 and env.payoff == "zero_sum"
  assert env.num_chance_outcomes == 1
  assert env.observation_shape == (5, 5, 3)
  assert env.version == 2  # canonical encoding
  for (r, c), n in {(5, 5): 75, (6, 6): 108, (8, 8): 192, (6, 4): 72}.items():
    assert _env(r, c).num_actions == n == r * c * 3
    assert _env(r, c).observation_shape == (r, c, 3)


@pytest.mark.parametrize("rows,columns,home", [(5, 5, 1), (6, 6, 2), (8, 8, 2)])
def test_initial_position(rows, columns, home):
  env = _env(rows, columns)
  s = env.init(jax.random.PRNGKey(0))
  board = np.asarray(s.game.board)
  assert board.shape == (rows, columns)
  assert (board[:home] == BLACK).all() and (board[rows - home :] == WHITE).all()
  assert (board[home : rows - home] == EMPTY).all()
  assert int(s.current_player) == 0
  # Black's front row moves: 3 a piece, 2 at the edges.
  assert int(s.legal_action_mask.sum()) == 3 * columns - 2
  # In the mover's frame the front row is row home - 1 for either side, so
  # white's first moves have the same ids as black's.
  legal = np.flatnonzero(s.legal_action_mask)
  assert (legal // 3 // columns == home - 1).all()
  white = env.game.from_board(env.game.initial_board(), 1)
  np.testing.assert_array_equal(np.flatnonzero(env.game.legal_action_mask(white)), legal)


def test_chance_never_acts():
  env = _env(6, 6)
  t = random_playout(env, jax.random.PRNGKey(0), 8, env.max_game_length)
  assert not (t["current_player"] == CHANCE).any()
  assert not t["chance_probs"].any()
  assert (t["current_player"][-1] == TERMINAL).all()
  assert t["terminated"][-1].all() and not t["truncated"].any()


def test_forward_and_diagonal_moves_onto_empty():
  env = _env()
  s = _state(env, ["....b", "..b..", ".....", ".....", "w...."], 0)
  # Black: c4 goes to b3, c3 or d3; e5 (right edge) to d4 or e4.
  assert _legal_names(env, s) == ["c4b3", "c4c3", "c4d3", "e5d4", "e5e4"]
  s2 = _act(env, s, "c4c3")
  board = np.asarray(s2.game.board)
  assert board[1, 2] == EMPTY and board[2, 2] == BLACK
  assert int(s2.current_player) == 1 and not bool(s2.done)
  np.testing.assert_array_equal(s2.rewards, [0.0, 0.0])
  # White moves up: a1 goes to a2 or b2.
  assert _legal_names(env, s2) == ["a1a2", "a1b2"]


def test_no_straight_capture_and_no_move_onto_own_piece():
  env = _env()
  s = _state(env, [".....", "..bb.", "..w..", ".....", "....."], 0)
  names = _legal_names(env, s)
  assert "c4c3" not in names and "c4c3*" not in names  # blocked straight
  assert "d4c3*" in names  # but a diagonal capture of the same piece is legal
  assert "c4d3" in names and "c4b3" in names
  s = _state(env, [".....", ".....", "..w..", ".ww..", "....b"], 1)
  names = _legal_names(env, s)
  assert not any(n.startswith("b2") and n.endswith("c3") for n in names)
  assert "c2c3" not in names  # own piece in the way
  assert not any("*" in n for n in names)  # black's piece is not reachable


def test_diagonal_capture():
  env = _env()
  s = _state(env, ["b....", "..b..", "...w.", ".....", "w...."], 0)
  assert "c4d3*" in _legal_names(env, s)
  assert "c4d3" not in _legal_names(env, s)  # the name marks the capture
  # One action id captures or not depending on the position.
  a = next(a for a in range(env.num_actions) if env.game.action_to_string(s.game, a) == "c4d3*")
  assert a == (1 * 5 + 2) * 3 + 2  # from (1, 2), forward-right for black
  empty = _state(env, ["b....", "..b..", ".....", ".....", "w...."], 0)
  assert env.game.action_to_string(empty.game, a) == "c4d3"
  assert bool(empty.legal_action_mask[a])
  s2 = _act(env, s, "c4d3*")
  board = np.asarray(s2.game.board)
  assert board[2, 3] == BLACK and board[1, 2] == EMPTY
  assert (board == WHITE).sum() == 1
  assert not bool(s2.done)
  np.testing.assert_array_equal(s2.rewards, [0.0, 0.0])


@pytest.mark.parametrize(
  "player,picture,move",
  [
    (0, [".....", ".....", ".....", "..b..", "w...."], "c2c1"),
    (0, [".....", ".....", ".....", "..b..", "w..w."], "c2d1*"),
    (1, ["....b", ".w...", ".....", ".....", "....."], "b4a5"),
  ],
)
def test_win_on_far_row(player, picture, move):
  env = _env()
  s = _act(env, _state(env, picture, player), move)
  assert bool(s.terminated) and int(s.current_player) == TERMINAL
  expected = [1.0, -1.0] if player == 0 else [-1.0, 1.0]
  np.testing.assert_array_equal(s.rewards, expected)
  assert "won" in env.render(s)
  # Absorbing afterwards.
  s3 = env.step(s, 0)
  np.testing.assert_array_equal(s3.rewards, [0.0, 0.0])


@pytest.mark.parametrize(
  "player,picture,move",
  [
    (0, ["b....", ".b...", "..w..", ".....", "....."], "b4c3*"),
    (1, [".....", "..b..", ".w...", ".....", "w...."], "b3c4*"),
  ],
)
def test_win_by_capturing_all(player, picture, move):
  env = _env()
  s = _act(env, _state(env, picture, player), move)
  assert bool(s.terminated)
  expected = [1.0, -1.0] if player == 0 else [-1.0, 1.0]
  np.testing.assert_array_equal(s.rewards, expected)


def test_mask_matches_action_table_reference():
  """The shifted-board mask equals a direct per-action reading of the rules
  (on the board turned 180 degrees for white) on random boards, for both
  movers and a non-square board."""
  for rows, columns in [(5, 5), (6, 4), (8, 8)]:
    env = _env(rows, columns)
    t = action_tables(rows, columns)
    rng = np.random.default_rng(rows * columns)
    boards = rng.integers(0, 3, size=(64, rows, columns)).astype(np.int8)
    for player in (0, 1):
      gs = jax.vmap(
        lambda b: env.game.from_board(np.zeros((rows, columns)), player).replace(board=b)
      )(jnp.asarray(boards))
      masks = np.asarray(jax.vmap(env.game.legal_action_mask)(gs))
      for board, mask in zip(boards, masks):
        frame = (board if player == 0 else board[::-1, ::-1]).reshape(-1)
        target = frame[t["dst"]]
        onto = (target == EMPTY) | ((target == 2 - player) & ~t["straight"])
        ref = t["on_board"] & (frame[t["src"]] == player + 1) & onto
        np.testing.assert_array_equal(mask, ref)


def test_observation_point_of_view():
  env = _env()
  s = _state(env, ["b....", ".....", ".....", ".....", "...ww"], 1)
  obs = np.asarray(s.observation)
  assert obs.dtype == np.float32 and obs.shape == (5, 5, 3)
  # White's frame is the board turned 180 degrees: d1, e1 -> (0, 1), (0, 0).
  assert obs[0, 1, 0] == obs[0, 0, 0] == 1 and obs[..., 0].sum() == 2
  assert obs[4, 4, 1] == 1 and obs[..., 1].sum() == 1  # black's a5
  assert obs[..., 2].sum() == 22
  black_view = np.asarray(env.observe(s, 0))  # black's frame: the board as is
  assert black_view[0, 0, 0] == 1 and black_view[..., 0].sum() == 1
  assert black_view[4, 3, 1] == black_view[4, 4, 1] == 1
  np.testing.assert_array_equal(black_view[..., 0], obs[::-1, ::-1, 1])
  np.testing.assert_array_equal(black_view[..., 2], obs[::-1, ::-1, 2])


def _swap_and_turn(board):
  """The colour-swapped board turned by 180 degrees."""
  swapped = np.where(board == BLACK, WHITE, np.where(board == WHITE, BLACK, board))
  return swapped[::-1, ::-1].astype(np.int8)


@pytest.mark.parametrize("rows,columns", [(5, 5), (6, 4), (8, 8)])
def test_canonical_symmetry(rows, columns):
  """A position and its colour-swapped copy turned by 180 degrees, with the
  other side to move, give identical observations (for either viewer) and
  legal masks, and each action leads to positions that correspond again,
  with the rewards swapped."""
  env = _env(rows, columns)
  games = _random_positions(env, jax.random.PRNGKey(rows + columns), 8, 30)
  step = jax.jit(env.step)
  observe = jax.jit(env.observe)
  num = games.board.shape[0]
  assert num > 100
  for n in range(0, num, max(1, num // 60)):
    board, p = games.board[n], int(games.player[n])
    s, t = _state(env, board, p), _state(env, _swap_and_turn(board), 1 - p)
    np.testing.assert_array_equal(s.observation, t.observation)
    np.testing.assert_array_equal(observe(s, 1 - p), observe(t, p))
    np.testing.assert_array_equal(s.legal_action_mask, t.legal_action_mask)
    for a in np.flatnonzero(s.legal_action_mask)[::3]:
      s2, t2 = step(s, int(a)), step(t, int(a))
      np.testing.assert_array_equal(_swap_and_turn(np.asarray(s2.game.board)), t2.game.board)
      np.testing.assert_array_equal(s2.rewards, np.asarray(t2.rewards)[::-1])
      assert bool(s2.done) == bool(t2.done)
      np.testing.assert_array_equal(s2.observation, t2.observation)
  # The start is its own mirror: both sides see the same first position.
  g = env.game.init(jax.random.PRNGKey(0))
  np.testing.assert_array_equal(env.game.observe(g, 0), env.game.observe(g, 1))


def _openspiel_name(os_action, rows, columns):
  """OpenSpiel's move name of its action id (written from its encoding)."""
  rest, capture = divmod(os_action, 2)
  square, direction = divmod(rest, 6)
  r, c = divmod(square, columns)
  dr, dc = [(1, -1), (1, 0), (1, 1), (-1, -1), (-1, 0), (-1, 1)][direction]
  return f"{chr(ord('a') + c)}{rows - r}{chr(ord('a') + c + dc)}{rows - r - dr}" + (
    "*" if capture else ""
  )


@pytest.mark.parametrize("rows,columns", [(5, 5), (6, 4), (8, 8)])
def test_openspiel_action_round_trip(rows, columns):
  """On every legal action of many random positions (both movers),
  `from_openspiel_action(to_openspiel_action(a)) == a`, the OpenSpiel ids
  are distinct, their capture bit says whether the target holds an opposing
  piece, and their OpenSpiel name is our `action_to_string`."""
  env = _env(rows, columns)
  games = _random_positions(env, jax.random.PRNGKey(7 * rows + columns), 24, 40)
  every = jnp.arange(env.num_actions)
  to_os = jax.jit(jax.vmap(jax.vmap(to_openspiel_action, (None, 0)), (0, None)))
  from_os = jax.jit(jax.vmap(jax.vmap(from_openspiel_action, (None, 0))))
  masks = np.asarray(jax.jit(jax.vmap(env.game.legal_action_mask))(games))
  assert masks.shape[0] > 200
  os_ids = np.asarray(to_os(games, every))  # [N, num_actions]
  back = np.asarray(from_os(games, jnp.asarray(os_ids)))
  boards = games.board.reshape(masks.shape[0], -1)
  players = games.player
  for n in range(masks.shape[0]):
    legal = np.flatnonzero(masks[n])
    ids = os_ids[n, legal]
    np.testing.assert_array_equal(back[n, legal], legal)
    assert len(set(ids.tolist())) == len(legal)
    assert (ids >= 0).all() and (ids < rows * columns * 12).all()
    p = players[n]
    direction = (ids // 2) % 6
    assert ((direction >= 3) == (p == 1)).all()  # the mover's directions
    src = ids // 12
    dst = src + (columns if p == 0 else -columns) + np.array([-1, 0, 1, -1, 0, 1])[direction]
    assert (boards[n, src] == p + 1).all()
    np.testing.assert_array_equal(ids % 2, boards[n, dst] == 2 - p)
    if n % 7 == 0:  # names are slow-ish Python
      g = jax.tree.map(lambda x: x[n], games)
      for a, i in zip(legal, ids):
        assert env.game.action_to_string(g, int(a)) == _openspiel_name(int(i), rows, columns)


def test_render_draws_the_board():
  env = _env()
  text = env.render(env.init(jax.random.PRNGKey(0)))
  lines = text.splitlines()
  assert lines[0] == " 5 bbbbb" and lines[4] == " 1 wwwww"
  assert lines[5].strip() == "abcde" and "black (player 0) to move" in text


def test_bad_params():
  with pytest.raises(ValueError, match="rows must be in 2..16"):
    envs.make("breakthrough", rows=1)
  with pytest.raises(ValueError, match="columns must be in 2..16"):
    envs.make("breakthrough", columns=40)
  with pytest.raises(ValueError, match="valid: random, mcts"):
    envs.bots.make_bot("alphabeta", _env())
  with pytest.raises(ValueError, match="num_simulations"):
    mcts_policy(_env(), num_simulations=0)
  with pytest.raises(ValueError, match="max_legal_actions must be in 1..75"):
    mcts_policy(_env(), max_legal_actions=76)


def test_random_legal_action():
  mask = np.zeros((4, 300), bool)
  mask[0, [3, 40, 299]] = True
  mask[1, 31:33] = True  # across a block boundary
  mask[2, 5] = True
  keys = jax.random.split(jax.random.PRNGKey(0), 3000)
  draws = np.asarray(jax.jit(jax.vmap(random_legal_action, (None, 0)))(jnp.asarray(mask), keys))
  assert set(draws[:, 0]) == {3, 40, 299}
  assert set(draws[:, 1]) == {31, 32} and set(draws[:, 2]) == {5}
  assert set(draws[:, 3]) == {0}  # no legal action
  counts = np.bincount(draws[:, 0], minlength=300)[[3, 40, 299]]
  assert counts.min() > 850  # 1000 expected each; 850 is > 5 sigma away


def test_legal_slots_and_bound():
  mask = np.zeros((2, 300), bool)
  mask[0, [7, 3, 250]] = True
  actions, valid = jax.jit(legal_slots, static_argnums=1)(jnp.asarray(mask), 5)
  np.testing.assert_array_equal(actions[0, :3], [3, 7, 250])
  np.testing.assert_array_equal(valid, [[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
  # The slot bound (three moves a piece) holds at the start and in play.
  for rows in (5, 8):
    env = _env(rows, rows)
    t = random_playout(env, jax.random.PRNGKey(rows), 8, 40)
    assert t["legal_action_mask"].sum(-1).max() <= env.game.max_legal_actions


def test_rollout_value_at_decided_positions():
  env = _env()
  # Black to move: every move of b2 reaches row 1, so every playout wins.
  black = _state(env, [".....", ".....", ".....", ".b...", "....w"], 0)
  # White to move: whatever it plays, black's b2 then reaches row 1.
  white = _state(env, [".....", ".....", ".....", ".b...", "....w"], 1)
  s = jax.tree.map(lambda *x: jnp.stack(x), black, white)
  v = rollout_value(env, s, jax.random.PRNGKey(0))
  np.testing.assert_array_equal(v, [1.0, -1.0])


def test_players_are_legal_and_mcts_takes_the_only_win():
  env = _env()
  # One move wins at once (a2b1* for black, e4d5* for white); every other
  # move lets the opponent reach the far row next.
  black = _state(env, ["b....", "...w.", "....b", "b....", "ww..."], 0)
  white = _state(env, ["...bb", "....w", ".....", ".b...", "....w"], 1)
  wins = ["a2b1*", "e4d5*"]
  s = jax.tree.map(lambda *x: jnp.stack(x), black, white)
  legal = np.asarray(s.legal_action_mask)
  assert legal.sum(-1).min() >= 3  # a real choice
  for name in ("random", "mcts:32"):
    policy = jax.jit(envs.bots.make_bot(name, env)[1])
    for seed in range(3):
      a = np.asarray(policy(s, jax.random.PRNGKey(seed)))
      assert a.shape == (2,) and legal[np.arange(2), a].all()
      if name == "mcts:32":
        names = [env.game.action_to_string(g, int(x)) for g, x in zip((black.game, white.game), a)]
        assert names == wins, (seed, names)
