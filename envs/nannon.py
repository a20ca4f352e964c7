"""Nannon (Pollack 2005; nannon.com; NDMZ paper `000`, section 4.1).

A nano backgammon: two players, `points` board spots, `checkers` per side and
one die with `die_sides` faces. `envs.make("nannon")` is the paper's 6-3-6;
`envs.make("nannon", points=12, checkers=5)` is 12-5-6.

Parameters (`envs.make("nannon", **params)`):
  points: int, board spots n (default 6).
  checkers: int, checkers per side k (default 3).
  die_sides: int, faces d of the die (default 6), >= 2.
  start: str, the spots (in each side's own numbering) where each side's
    checkers stand at the start, comma separated; the other checkers start at
    HOME. Default "1,2" (nannon.com). "" starts with every checker at HOME.

Rules (nannon.com/rules.html). Each side numbers the spots 1..n in its own
direction of travel: my spot s is the opponent's spot n + 1 - s. A checker
moves from HOME (spot 0) forward by the die roll; beyond spot n it reaches
SAFETY (any high enough roll bears off; no exact roll needed). At most one
checker per spot: a checker may not land on its own colour; landing on a lone
opponent checker hits it back to the opponent's HOME; two checkers of one
colour on adjacent spots form a prime and cannot be hit (jumping over them is
allowed). A player must move if any move is legal; otherwise the turn is
forfeited. The first to bring all checkers to SAFETY wins: +1, the other -1
(no gammons; payoff "zero_sum").

Flow and chance outcomes (one outcome space, `num_chance_outcomes = 3d - 2`):
  * The game starts at the opening chance node: both throw, the higher moves
    the difference (ties re-roll). Outcome `d + (d-1)*starter + (m-1)` means
    `starter` (0 or 1) moves first with a roll of m in 1..d-1; its
    probability is (d - m) / (d (d - 1)), so either side starts w.p. 1/2 and
    P(m) is proportional to d - m.
  * Each later turn starts with a die-roll chance node for the mover: outcome
    r - 1 (0..d-1) is a roll of r, each w.p. 1/d.
  * After a roll the mover decides; if no move is legal the turn is forfeited
    at once and the next node is the other player's die roll (two chance
    nodes in a row).

Actions (`num_actions = n + 1`): action 0 moves a checker from HOME; action s
in 1..n moves the mover's checker on its spot s. Checkers at HOME are
interchangeable, so this names every distinct move.

Observation: float32 `[2n + 4(k+1) + d + 2]`, from `player`'s point of view
(the mover at decision nodes, the player about to roll at roll nodes, player 0
at the opening node), concatenating
  my checkers on my spots 1..n (n), the opponent's checkers on my spots 1..n
  (n), one-hots of my HOME count, the opponent's HOME count, my SAFETY count
  and the opponent's SAFETY count (k+1 each), the one-hot die just rolled (d,
  zeros when no die is showing), 1 if `player` is the one to roll or move,
  1 at the opening chance node.

max_game_length: a game can in principle loop forever (hits send checkers
back), so it is truncated at `max_game_length = 10 * n * k` transitions
(chance included; 180 for 6-3-6, 600 for 12-5-6). A 6-3-6 game lasts about
12 turns after the opening move (at most 2 + 2 * turns transitions) in random
and in optimal play; `tests/test_nannon_solver.py` computes exactly that
random-vs-random and optimal-vs-optimal games outlast the bound with
probability below 1e-12 (about 1e-19 for 6-3-6).

The helpers `legal_moves` and `apply_move` work on a position seen by the
mover (`mine`, `theirs` bool `[n]` on the mover's spots, HOME counts) and are
shared with the exact solver in `envs/nannon_solver.py`.
"""

from __future__ import annotations

from math import comb
from typing import Tuple

import jax
import jax.numpy as jnp
from flax import struct

from envs.core import CHANCE, TERMINAL, Env, Game, State
from envs.registry import register

# Phases of `NannonState.phase`.
OPENING, ROLL, DECIDE, OVER = 0, 1, 2, 3


def num_positions(points: int, checkers: int) -> int:
  """Number of positions seen by the player to move: eq. (2) of the NDMZ paper.

  i and j count the mover's and the opponent's checkers on the board; the
  others are split between HOME and SAFETY in k + 1 - i (k + 1 - j) ways.
  """
  n, k = points, checkers
  return sum(
    comb(n, i) * comb(n - i, j) * (k + 1 - i) * (k + 1 - j)
    for i in range(min(k, n) + 1)
    for j in range(min(k, n - i) + 1)
  )


def parse_start(start: str, points: int, checkers: int) -> Tuple[int, ...]:
  """The start spots as a sorted tuple; raises ValueError if invalid."""
  text = start.strip()
  if not text:
    return ()
  try:
    spots = tuple(sorted(int(s) for s in text.split(",")))
  except ValueError:
    raise ValueError(
      f"nannon: start must be comma-separated spot numbers "
      f"such as '1,2' (or '' for all at HOME), got {start!r}"
    ) from None
  if len(set(spots)) != len(spots):
    raise ValueError(f"nannon: start spots must be distinct, got {start!r}")
  if any(not 1 <= s <= points for s in spots):
    raise ValueError(f"nannon: start spots must lie in 1..points={points}, got {start!r}")
  if len(spots) > checkers:
    raise ValueError(
      f"nannon: start places {len(spots)} checkers but each side has checkers={checkers}"
    )
  clash = [s for s in spots if points + 1 - s in spots]
  if clash:
    raise ValueError(
      f"nannon: start {start!r} puts both sides on one spot (my spot s is "
      f"the opponent's spot points+1-s={points + 1 - clash[0]}); pick spots "
      f"with no two summing to points+1={points + 1}"
    )
  return spots


def legal_moves(
  mine: jax.Array, theirs: jax.Array, home_me: jax.Array, roll: jax.Array
) -> jax.Array:
  """bool `[n + 1]`: which actions (0 HOME, s = spot s) are legal with `roll`.

  Args:
    mine, theirs: bool `[n]`, the mover's and the opponent's checkers on the
      mover's spots 1..n.
    home_me: int `[]`, the mover's checkers at HOME.
    roll: int `[]`, the die, 1..d.
  """
  n = mine.shape[-1]
  # The spots as bits of one word (spot s at bit s, s = 1..n <= 24): the
  # squares a move reaches are shifts of it, where indexing the board with
  # the roll would be a gather per action under vmap (1.25x the keyed step).
  spot_bit = jnp.uint32(1) << jnp.arange(1, n + 1, dtype=jnp.uint32)
  mine_bits = jnp.sum(jnp.where(mine, spot_bit, 0), dtype=jnp.uint32)
  theirs_bits = jnp.sum(jnp.where(theirs, spot_bit, 0), dtype=jnp.uint32)
  src = jnp.arange(n + 1, dtype=jnp.uint32)
  has = jnp.concatenate([(home_me > 0)[None], mine])
  dest = src + jnp.asarray(roll).astype(jnp.uint32)  # 1..n lands on the board; > n bears off

  def at(bits, spot):  # spots past 31 shift to 0 (XLA's logical shift)
    return ((bits >> spot) & 1) == 1

  primed = at(theirs_bits, dest - 1) | at(theirs_bits, dest + 1)
  blocked = (dest <= n) & (at(mine_bits, dest) | (at(theirs_bits, dest) & primed))
  return has & ~blocked


def apply_move(
  mine: jax.Array,
  theirs: jax.Array,
  home_me: jax.Array,
  home_opp: jax.Array,
  roll: jax.Array,
  action: jax.Array,
):
  """Plays a legal `action` with `roll`, still from the mover's point of view.

  Returns (mine, theirs, home_me, home_opp) after the move, same shapes.
  """
  n = mine.shape[-1]
  spots = jnp.arange(1, n + 1)
  dest = action + roll
  src_hot = spots == action  # all False for action 0 (HOME)
  dst_hot = spots == dest  # all False when bearing off
  hit = jnp.any(theirs & dst_hot)
  mine = (mine & ~src_hot) | dst_hot
  theirs = theirs & ~dst_hot
  home_me = home_me - (action == 0).astype(home_me.dtype)
  home_opp = home_opp + hit.astype(home_opp.dtype)
  return mine, theirs, home_me, home_opp


@struct.dataclass
class NannonState:
  """board: bool `[2, n]`, board[p, s-1] = player p has a checker on its own
  spot s. home: int32 `[2]` checkers at HOME (SAFETY = k - HOME - board).
  mover: int32 `[]` the player to roll or move (the winner once over).
  phase: int32 `[]` OPENING, ROLL, DECIDE or OVER. die: int32 `[]` the roll
  being played (0 when none)."""

  board: jax.Array
  home: jax.Array
  mover: jax.Array
  phase: jax.Array
  die: jax.Array


def relative(board: jax.Array, home: jax.Array, player: jax.Array):
  """(mine, theirs, home_me, home_opp) seen by `player` (see `legal_moves`)."""
  # Selects, not indexing with `player` (a gather under vmap).
  first = jnp.asarray(player) == 0
  mine = jnp.where(first, board[0], board[1])
  theirs = jnp.where(first, board[1], board[0])[::-1]
  return mine, theirs, jnp.where(first, home[0], home[1]), jnp.where(first, home[1], home[0])


def state_at(env: Env, spots0=(), spots1=(), home=(0, 0), mover: int = 0, die: int = 0) -> State:
  """A hand-built `envs.State` (Python side; for tests and analysis).

  Args:
    env: from `envs.make("nannon", ...)`.
    spots0, spots1: the spots of player 0's and player 1's checkers on the
      board, each in its own numbering (1..n); SAFETY holds the rest.
    home: the HOME counts of players 0 and 1.
    mover: the player to roll (die 0) or to move (die 1..d).
    die: 0 for the mover's roll chance node, else the roll to play.

  Raises:
    ValueError: an impossible board, or a die with no legal move.
  """
  game = env.game
  if not isinstance(game, Nannon):
    raise ValueError(f"state_at needs a nannon env, got {env!r}")
  n, k, d = game.n, game.k, game.d
  board = [[False] * n, [False] * n]
  for p, spots in enumerate((spots0, spots1)):
    for s in spots:
      if not 1 <= s <= n or board[p][s - 1]:
        raise ValueError(f"bad or repeated spot {s} for player {p} (1..{n})")
      board[p][s - 1] = True
    if len(spots) + home[p] > k:
      raise ValueError(f"player {p} has more than checkers={k} checkers")
  if any(board[0][s] and board[1][n - 1 - s] for s in range(n)):
    raise ValueError("both players on one spot (spot s of player 0 is spot n+1-s of player 1)")
  if not 0 <= die <= d or mover not in (0, 1):
    raise ValueError(f"die must be in 0..{d} and mover 0 or 1")
  g = NannonState(
    board=jnp.asarray(board),
    home=jnp.asarray(home, jnp.int32),
    mover=jnp.int32(mover),
    phase=jnp.int32(DECIDE if die else ROLL),
    die=jnp.int32(die),
  )
  if die and not bool(jnp.any(game.legal_action_mask(g))):
    raise ValueError(
      f"no legal move with die {die}: the turn is forfeited, so this is not a decision node"
    )
  return env._make_state(  # pylint: disable=protected-access
    g, rewards=jnp.zeros((2,), jnp.float32), step_count=jnp.int32(0), illegal=jnp.bool_(False)
  )


@register
class Nannon(Game):
  name = "nannon"
  version = 1
  payoff = "zero_sum"
  default_params = {"points": 6, "checkers": 3, "die_sides": 6, "start": "1,2"}

  @classmethod
  def validate_params(cls, params):
    n, k, d = params["points"], params["checkers"], params["die_sides"]
    if not 2 <= n <= 24:
      raise ValueError(f"nannon: points must be in 2..24, got {n}")
    if k < 1:
      raise ValueError(f"nannon: checkers must be >= 1, got {k}")
    if d < 2:
      raise ValueError(
        f"nannon: die_sides must be >= 2 (the opening roll needs two different faces), got {d}"
      )
    if num_positions(n, k) >= 2**31:
      raise ValueError(
        f"nannon: points={n}, checkers={k} has "
        f"{num_positions(n, k):,} positions; the int32 position "
        "rank needs fewer than 2**31"
      )
    parse_start(params["start"], n, k)

  def __init__(self, **params):
    super().__init__(**params)
    self.n = self.params["points"]
    self.k = self.params["checkers"]
    self.d = self.params["die_sides"]
    self.start_spots = parse_start(self.params["start"], self.n, self.k)

  num_players = 2
  # A roll, then forfeits: each forfeit adds a roll, without bound (in
  # random 6-3-6 play 97% of runs have one node, 0.2% more than two); the
  # keyed step unrolls this many and loops for the rest.
  max_chance_run = 3
  materialize_state = False  # its mask and observation are cheap (see Game)

  @property
  def num_actions(self) -> int:
    return self.n + 1

  @property
  def max_legal_actions(self) -> int:
    """A move per checker on the board, plus one from home while any is
    there: at most `checkers` (all on the board, or one at home and the rest
    on it)."""
    return min(self.k, self.n + 1)

  @property
  def num_chance_outcomes(self) -> int:
    return 3 * self.d - 2

  @property
  def max_chance_outcomes(self) -> int:
    """After the opening (2 (d - 1) outcomes) every chance node is a die roll."""
    return self.d

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return (2 * self.n + 4 * (self.k + 1) + self.d + 2,)

  @property
  def max_game_length(self) -> int:
    return 10 * self.n * self.k

  def opening_probs(self) -> jax.Array:
    """float32 `[2 (d-1)]`: P(starter, m) = (d - m) / (d (d-1)), starter-major."""
    d = self.d
    m = jnp.arange(1, d)
    p = (d - m) / (d * (d - 1))
    return jnp.concatenate([p, p]).astype(jnp.float32)

  def start_board(self) -> jax.Array:
    """bool `[2, n]`: both sides on `start` spots."""
    row = jnp.zeros((self.n,), bool)
    for s in self.start_spots:
      row = row.at[s - 1].set(True)
    return jnp.stack([row, row])

  def init(self, key: jax.Array) -> NannonState:
    del key  # the start is the opening-roll chance node
    rest = self.k - len(self.start_spots)
    return NannonState(
      board=self.start_board(),
      home=jnp.full((2,), rest, jnp.int32),
      mover=jnp.int32(0),
      phase=jnp.int32(OPENING),
      die=jnp.int32(0),
    )

  def current_player(self, g: NannonState) -> jax.Array:
    return jnp.select([g.phase == DECIDE, g.phase == OVER], [g.mover, TERMINAL], CHANCE).astype(
      jnp.int32
    )

  def perspective(self, g: NannonState) -> jax.Array:
    return g.mover

  def _legal(self, g: NannonState) -> jax.Array:
    mine, theirs, home_me, _ = relative(g.board, g.home, g.mover)
    return legal_moves(mine, theirs, home_me, g.die)

  def legal_action_mask(self, g: NannonState) -> jax.Array:
    return self._legal(g) & (g.phase == DECIDE)

  def chance_probs(self, g: NannonState) -> jax.Array:
    d = self.d
    roll = jnp.concatenate(
      [jnp.full((d,), 1.0 / d, jnp.float32), jnp.zeros((2 * (d - 1),), jnp.float32)]
    )
    opening = jnp.concatenate([jnp.zeros((d,), jnp.float32), self.opening_probs()])
    return jnp.where(g.phase == OPENING, opening, roll)

  def apply_chance(self, g: NannonState, outcome: jax.Array):
    d = self.d
    q = outcome - d
    opening = g.phase == OPENING
    mover = jnp.where(opening, q // (d - 1), g.mover).astype(jnp.int32)
    die = jnp.where(opening, q % (d - 1) + 1, outcome + 1).astype(jnp.int32)
    g = g.replace(mover=mover, die=die, phase=jnp.int32(DECIDE))
    # No legal move: the turn is forfeited and the other player rolls.
    forfeit = ~jnp.any(self._legal(g))
    g = g.replace(
      mover=jnp.where(forfeit, 1 - mover, mover).astype(jnp.int32),
      die=jnp.where(forfeit, 0, die).astype(jnp.int32),
      phase=jnp.where(forfeit, ROLL, DECIDE).astype(jnp.int32),
    )
    return g, jnp.zeros((2,), jnp.float32)

  def apply_action(self, g: NannonState, action: jax.Array):
    p = g.mover
    mine, theirs, home_me, home_opp = relative(g.board, g.home, p)
    mine, theirs, home_me, home_opp = apply_move(mine, theirs, home_me, home_opp, g.die, action)
    board = jnp.where(p == 0, jnp.stack([mine, theirs[::-1]]), jnp.stack([theirs[::-1], mine]))
    home = jnp.where(p == 0, jnp.stack([home_me, home_opp]), jnp.stack([home_opp, home_me])).astype(
      jnp.int32
    )
    won = (home_me == 0) & ~jnp.any(mine)
    g = NannonState(
      board=board,
      home=home,
      mover=jnp.where(won, p, 1 - p).astype(jnp.int32),
      phase=jnp.where(won, OVER, ROLL).astype(jnp.int32),
      die=jnp.int32(0),
    )
    me = jax.nn.one_hot(p, 2, dtype=jnp.float32)
    rewards = jnp.where(won, 2.0 * me - 1.0, 0.0)
    return g, rewards.astype(jnp.float32)

  def observe(self, g: NannonState, player: jax.Array) -> jax.Array:
    k, d = self.k, self.d
    mine, theirs, home_me, home_opp = relative(g.board, g.home, player)
    safe_me = k - home_me - jnp.sum(mine)
    safe_opp = k - home_opp - jnp.sum(theirs)
    hot = lambda x: jax.nn.one_hot(x, k + 1, dtype=jnp.float32)
    showing = (g.phase == DECIDE) & (g.die > 0)
    die = jax.nn.one_hot(g.die - 1, d, dtype=jnp.float32) * showing
    my_turn = ((g.phase == ROLL) | (g.phase == DECIDE)) & (player == g.mover)
    return jnp.concatenate(
      [
        mine.astype(jnp.float32),
        theirs.astype(jnp.float32),
        hot(home_me),
        hot(home_opp),
        hot(safe_me),
        hot(safe_opp),
        die,
        my_turn.astype(jnp.float32)[None],
        (g.phase == OPENING).astype(jnp.float32)[None],
      ]
    )

  def render(self, g: NannonState) -> str:
    n, k = self.n, self.k
    board = [[bool(x) for x in row] for row in g.board.tolist()]
    home = [int(h) for h in g.home.tolist()]
    cells = []
    for s in range(1, n + 1):  # absolute spot s = player 0's spot s
      if board[0][s - 1]:
        cells.append("X")
      elif board[1][n - s]:
        cells.append("O")
      else:
        cells.append(".")
    safe = [k - home[p] - sum(board[p]) for p in (0, 1)]
    phase, mover, die = int(g.phase), int(g.mover), int(g.die)
    status = {
      OPENING: "opening roll to come",
      ROLL: f"player {mover} to roll",
      DECIDE: f"player {mover} to move a {die}",
      OVER: f"player {mover} won",
    }[phase]
    return "\n".join(
      [
        f"X = player 0 (moves left to right), O = player 1; {status}",
        "X HOME " + str(home[0]) + " | " + " ".join(cells) + " | X SAFETY " + str(safe[0]),
        f"O SAFETY {safe[1]}, O HOME {home[1]}",
      ]
    )

  def action_to_string(self, g, action: int) -> str:
    if action == 0:
      return "enter from HOME"
    if 1 <= action <= self.n:
      return f"move the checker on spot {action}"
    return str(action)
