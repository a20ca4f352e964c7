"""Differential test: `einstein` against OpenSpiel `einstein_wurfelt_nicht`.

Our env runs 2,000 random games vmapped in one jitted scan with
placement="chance" (OpenSpiel's game tree: two 720-outcome placement nodes,
then a die node before every move), recording every node. OpenSpiel then
replays each game in a Python loop with the same placements, dice and moves,
and at every node the player, the chance outcomes, the legal action set, the
board after the transition, the rewards and the end of the game must agree.

Actions are compared through a mapping written here from OpenSpiel's
documented encoding, independently of `envs.einstein`; the env's own
`to_openspiel_action` is checked against it on every move played.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import einstein
from envs.core import CHANCE, TERMINAL

pyspiel = pytest.importorskip("pyspiel")

# Long programs (thousands of games, or searches), not long compiles: XLA's
# full optimisation (conftest.py).
pytestmark = pytest.mark.optimized

NUM_GAMES = 2000
# OpenSpiel directions (dr, dc); players 0 and 1 use 0..2 and 3..5.
OS_OFFSETS = {0: (1, 1), 1: (1, 0), 2: (0, 1), 3: (-1, 0), 4: (-1, -1), 5: (0, -1)}


def ours_from_openspiel(os_action: int) -> int:
  """Our action id for an OpenSpiel action id (independent reimplementation:
  the mover's view turns the board 180 degrees for player 1; view moves are
  0 diagonal, 1 row + 1, 2 col + 1)."""
  rest, _capture = divmod(os_action, 2)
  rest, direction = divmod(rest, 6)
  row, col = divmod(rest, 5)
  dr, dc = OS_OFFSETS[direction]
  if direction >= 3:  # player 1: turn the board
    row, col, dr, dc = 4 - row, 4 - col, -dr, -dc
  d = {(1, 1): 0, (1, 0): 1, (0, 1): 2}[(dr, dc)]
  return 3 * (5 * row + col) + d


# ours_from_openspiel as a table, for the replay loop.
OURS = [ours_from_openspiel(a) for a in range(300)]
# CELLS[square][code]: OpenSpiel's text for one square (`|__|`, `|b3|`, `|w1|`,
# a newline after each row of 5) holding code 0 (empty), 1..6 (black piece
# 1..6) or 7..12 (white piece 1..6).
CELLS = [
  [
    c + ("\n" if sq % 5 == 4 else "")
    for c in ["|__|"] + [f"|{side}{k}|" for side in "bw" for k in range(1, 7)]
  ]
  for sq in range(25)
]


def board_codes(pos: np.ndarray) -> np.ndarray:
  """int `[..., 25]`: the content code of each square for piece squares
  `pos` int `[..., 2, 6]` (-1 = gone)."""
  flat = pos.reshape(-1, 12).astype(np.int64)
  codes = np.zeros((flat.shape[0], 26), np.int64)
  rows = np.arange(flat.shape[0])[:, None].repeat(12, 1)
  codes[rows, np.where(flat >= 0, flat, 25)] = np.arange(1, 13)
  return codes[:, :25].reshape(pos.shape[:-2] + (25,))


def openspiel_string(codes) -> str:
  """OpenSpiel's `str(state)` for one board of square codes."""
  return "".join([CELLS[sq][c] for sq, c in enumerate(codes)])


def uniform_choice(state, key):
  """int32 `[]`: a uniform legal action, or a uniform possible chance outcome
  (the outcomes of a chance node are uniform in this game; the test checks
  it). Cheaper than sampling from 720 logits at every node."""
  u = jax.random.uniform(key)

  def pick(allowed):
    k = jnp.floor(u * jnp.sum(allowed)).astype(jnp.int32)
    return jnp.argmax(jnp.cumsum(allowed) > k).astype(jnp.int32)

  return jnp.where(
    state.current_player == CHANCE, pick(state.chance_probs > 0), pick(state.legal_action_mask)
  )


def record_games(num_games: int, key: jax.Array) -> dict:
  """Our side: `num_games` random games (placement="chance") in one jitted
  scan; numpy arrays `[max_game_length, num_games, ...]`, one row per node."""
  env = envs.make("einstein", placement="chance")
  steps = env.max_game_length

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, num_games))

    def body(s, k):
      a = jax.vmap(uniform_choice)(s, jax.random.split(k, num_games))
      n_chance = jnp.sum(s.chance_probs > 0, -1)
      # The possible outcomes are 0..n_chance-1, each equally likely.
      prefix = s.chance_probs[:, :1] * (jnp.arange(env.num_chance_outcomes) < n_chance[:, None])
      uniform = jnp.all(jnp.abs(s.chance_probs - prefix) < 1e-7, -1)
      os_a = jax.vmap(einstein.to_openspiel_action)(s.game, a)
      s2 = jax.vmap(env.step)(s, a)
      rec = dict(
        player=s.current_player,
        mask=s.legal_action_mask,
        n_chance=n_chance,
        uniform=uniform,
        action=a,
        os_action=os_a,
        pos=s2.game.pos.astype(jnp.int8),
        rewards=s2.rewards,
        next_player=s2.current_player,
      )
      return s2, rec

    _, rec = jax.lax.scan(body, s, jax.random.split(k1, steps))
    return rec

  rec = jax.device_get(run(key))
  return {k: np.asarray(v) for k, v in rec.items()}


@pytest.fixture(scope="module")
def trajectories():
  return record_games(NUM_GAMES, jax.random.PRNGKey(2024))


def replay_in_openspiel(t: dict) -> None:
  """Replays the recorded games in OpenSpiel and asserts they agree node by
  node: player, chance outcomes, legal set, board, rewards, end, returns."""
  num_games = t["player"].shape[1]
  game = pyspiel.load_game("einstein_wurfelt_nicht")
  per_game = {k: np.swapaxes(v, 0, 1) for k, v in t.items()}
  per_game["codes"] = board_codes(per_game.pop("pos"))
  lengths = []
  for b in range(num_games):
    g = {k: v[b].tolist() for k, v in per_game.items() if k != "mask"}
    mask = per_game["mask"][b]
    s = game.new_initial_state()
    step = 0
    while True:
      assert step < len(g["player"]), f"game {b} outlasted max_game_length"
      player = g["player"][step]
      assert player == s.current_player(), (b, step)
      if player == CHANCE:
        outcomes = [o for o, _ in s.chance_outcomes()]
        assert outcomes == list(range(g["n_chance"][step])), (b, step)
        assert g["uniform"][step], (b, step)
        s.apply_action(g["action"][step])
      else:
        legal = s.legal_actions()
        assert sorted(OURS[a] for a in legal) == np.flatnonzero(mask[step]).tolist(), (b, step)
        os_action = g["os_action"][step]
        assert os_action in legal, (b, step)
        assert OURS[os_action] == g["action"][step], (b, step)
        s.apply_action(os_action)
      assert str(s) == openspiel_string(g["codes"][step]), (b, step)
      assert s.rewards() == g["rewards"][step], (b, step)
      done = g["next_player"][step] == TERMINAL
      assert s.is_terminal() == done, (b, step)
      step += 1
      if done:
        break
    assert s.returns() == g["rewards"][step - 1], b
    lengths.append(step)
  # The sample must exercise the rules: long and short games, both winners,
  # wins by elimination as well as by the corner.
  lengths = np.array(lengths)
  games = np.arange(num_games)
  final = t["pos"][lengths - 1, games]
  winner = np.argmax(t["rewards"][lengths - 1, games], -1)
  eliminated = np.all(final[games, 1 - winner] < 0, -1)
  assert set(winner) == {0, 1}
  assert eliminated.any() and not eliminated.all()
  assert lengths.max() > 40 and lengths.min() < 20


def test_same_game_tree_as_openspiel(trajectories):
  replay_in_openspiel(trajectories)


@pytest.mark.slow
def test_same_game_tree_as_openspiel_many_games():
  for seed in range(5):
    replay_in_openspiel(record_games(4000, jax.random.PRNGKey(100 + seed)))


def test_openspiel_action_bijection_on_legal_moves(trajectories):
  """`from_openspiel_action` inverts `to_openspiel_action` on played moves."""
  t = trajectories
  decision = t["player"] >= 0
  os_a = jnp.asarray(t["os_action"][decision])
  back = jax.vmap(lambda a: einstein.from_openspiel_action(None, a))(os_a)
  np.testing.assert_array_equal(np.asarray(back), t["action"][decision])
