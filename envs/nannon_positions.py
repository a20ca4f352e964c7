"""Nannon's positions, for the exact solver (`envs.nannon_solver`, which
re-exports all of this): position ranking (`rank_position`, the NDMZ paper's
eq. (2)), the successor tables of every position and roll (`build_tables`),
and the decision states with the policy tables of a batched move function
(`policy_table_from_fn`, `one_ply_table`).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache, partial
from typing import Callable, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import nannon
from envs.core import Env, State
from envs.policy import OnePlyPolicy


# The solver refuses configurations larger than this (memory: ~150 B each).
MAX_SOLVER_POSITIONS = 20_000_000


def config_of(env: Optional[Env]) -> Tuple[int, int, int]:
  """(points, checkers, die_sides) of a nannon env (default 6-3-6)."""
  if env is None:
    env = envs.make("nannon")
  if not isinstance(env, Env) or env.id != "nannon":
    raise ValueError(f"expected an env from envs.make('nannon', ...), got {env!r}")
  p = env.params
  return p["points"], p["checkers"], p["die_sides"]


# ---------------------------------------------------------------- ranking ----


@lru_cache(maxsize=None)
def _binomials(n: int) -> np.ndarray:
  """int64 `[n + 1, n + 2]`: C[a, b] = binomial(a, b) (0 when b > a)."""
  c = np.zeros((n + 1, n + 2), np.int64)
  for a in range(n + 1):
    c[a, 0] = 1
    for b in range(1, a + 1):
      c[a, b] = c[a - 1, b - 1] + (c[a - 1, b] if b <= a - 1 else 0)
  return c


@lru_cache(maxsize=None)
def _block_starts(n: int, k: int) -> np.ndarray:
  """int64 `[(k+1)^2 + 1]`: first rank of each (i, j) block, i-major; i and j
  count the mover's and the opponent's checkers on the board."""
  c = _binomials(n)
  sizes = [
    c[n, i] * c[n - i, j] * (k + 1 - i) * (k + 1 - j) if i <= n and j <= n - i else 0
    for i in range(k + 1)
    for j in range(k + 1)
  ]
  return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def observation_decision(observation: jax.Array, points: int, checkers: int, die_sides: int):
  """(position int32 `[]`, roll int32 `[]`) of one observation
  (`NannonGame.observe`; vmap for a batch): the rank of the board seen by
  the observer, and the die shown, 1..d (0 where none is shown: not a
  decision node).
  """
  n, k, d = points, checkers, die_sides
  obs = jnp.asarray(observation)
  mine = obs[:n] > 0.5
  theirs = obs[n : 2 * n] > 0.5
  home_me = jnp.argmax(obs[2 * n : 2 * n + k + 1])
  home_opp = jnp.argmax(obs[2 * n + k + 1 : 2 * n + 2 * (k + 1)])
  die = obs[2 * n + 4 * (k + 1) : 2 * n + 4 * (k + 1) + d]
  roll = jnp.where(jnp.max(die) > 0.5, jnp.argmax(die) + 1, 0)
  return rank_position(mine, theirs, home_me, home_opp, k), roll.astype(jnp.int32)


def rank_position(
  mine: jax.Array, theirs: jax.Array, home_me: jax.Array, home_opp: jax.Array, checkers: int
) -> jax.Array:
  """int32 `[]`: the rank in 0..N-1 of one position (vmap for a batch).

  Args:
    mine, theirs: bool `[n]`, on the mover's spots.
    home_me, home_opp: int `[]`, checkers at HOME.
    checkers: k (static).
  Layout: blocks by (i, j) on-board counts; inside a block, the colex rank of
  `mine` among n cells, then of `theirs` among the n - i cells left, then the
  HOME counts.
  """
  n, k = mine.shape[-1], checkers
  c = jnp.asarray(_binomials(n), jnp.int32)
  starts = jnp.asarray(_block_starts(n, k)[:-1], jnp.int32)
  m = mine.astype(jnp.int32)
  t = theirs.astype(jnp.int32)
  i, j = jnp.sum(m), jnp.sum(t)
  cells = jnp.arange(n)
  mine_before = jnp.cumsum(m) - m
  r1 = jnp.sum(jnp.where(mine, c[cells, mine_before + 1], 0))
  compressed = cells - mine_before  # index among the cells mine leaves free
  theirs_before = jnp.cumsum(t) - t
  r2 = jnp.sum(jnp.where(theirs, c[compressed, theirs_before + 1], 0))
  layout = r1 * c[n - i, j] + r2
  per_home = k + 1 - j
  per = (k + 1 - i) * per_home
  home = home_me.astype(jnp.int32) * per_home + home_opp.astype(jnp.int32)
  return (starts[i * (k + 1) + j] + layout * per + home).astype(jnp.int32)


def unrank_position(index: jax.Array, points: int, checkers: int):
  """Inverse of `rank_position` for one index (vmap for a batch).

  Returns (mine bool `[n]`, theirs bool `[n]`, home_me int32, home_opp int32).
  """
  n, k = points, checkers
  c = jnp.asarray(_binomials(n), jnp.int32)
  starts = jnp.asarray(_block_starts(n, k), jnp.int32)
  index = jnp.asarray(index, jnp.int32)
  block = jnp.searchsorted(starts, index, side="right") - 1
  i, j = block // (k + 1), block % (k + 1)
  rem = index - starts[block]
  per_home = k + 1 - j
  per = (k + 1 - i) * per_home
  layout, home = rem // per, rem % per
  home_me, home_opp = home // per_home, home % per_home
  cj = c[n - i, j]
  r1, r2 = layout // cj, layout % cj
  mine = [None] * n
  left = i
  for cell in range(n - 1, -1, -1):  # colex decode, largest cell first
    v = c[cell, jnp.minimum(left, n + 1)]
    take = (left > 0) & (r1 >= v)
    r1 = r1 - jnp.where(take, v, 0)
    left = left - take.astype(jnp.int32)
    mine[cell] = take
  mine = jnp.stack(mine)
  m = mine.astype(jnp.int32)
  compressed = jnp.arange(n) - (jnp.cumsum(m) - m)
  theirs = [None] * n
  left = j
  for cell in range(n - 1, -1, -1):
    v = c[compressed[cell], jnp.minimum(left, n + 1)]
    take = ~mine[cell] & (left > 0) & (r2 >= v)
    r2 = r2 - jnp.where(take, v, 0)
    left = left - take.astype(jnp.int32)
    theirs[cell] = take
  return (mine, jnp.stack(theirs), home_me.astype(jnp.int32), home_opp.astype(jnp.int32))


def state_position(state: State, checkers: int) -> jax.Array:
  """int32 `[]`: the rank of the position seen by the player to roll or move
  in one (unbatched) nannon `State`."""
  g = state.game
  mine, theirs, home_me, home_opp = nannon.relative(g.board, g.home, g.mover)
  return rank_position(mine, theirs, home_me, home_opp, checkers)


# ----------------------------------------------------------------- tables ----


@dataclasses.dataclass(frozen=True)
class Tables:
  """The move graph over all positions (numpy, host memory).

  succ: int32 `[N, d, k+1]`, the successor position (seen by the next mover)
    of each slot and roll; N where the slot's move is illegal.
  slot_action: int32 `[N, k+1]`, the env action of each slot (0 HOME, spot
    s), -1 where the slot is empty.
  flip: int32 `[N]`, the same board seen by the opponent (a forfeited roll).
  lost: bool `[N]`, the opponent has every checker in SAFETY (game over).
  won: bool `[N]`, the mover has every checker in SAFETY (never to move).
  """

  points: int
  checkers: int
  die_sides: int
  succ: np.ndarray
  slot_action: np.ndarray
  flip: np.ndarray
  lost: np.ndarray
  won: np.ndarray

  @property
  def num_positions(self) -> int:
    return self.flip.shape[0]

  @property
  def decision(self) -> np.ndarray:
    """bool `[N, d]`: the mover has a choice to make (game on, a legal move)."""
    return (self.succ < self.num_positions).any(-1) & ~(self.lost | self.won)[:, None]


def _slot_actions(mine: jax.Array, k: int) -> jax.Array:
  """int32 `[k+1]`: 0 (HOME), then the spots of the mover's checkers in
  ascending order, -1 past the last."""
  n = mine.shape[-1]
  m = mine.astype(jnp.int32)
  order = jnp.cumsum(m)
  q = jnp.arange(1, k + 1)[:, None]
  spots = jnp.sum(jnp.where(mine & (order == q), jnp.arange(1, n + 1), 0), -1)
  on_board = q[:, 0] <= jnp.sum(m)
  return jnp.concatenate(
    [jnp.zeros((1,), jnp.int32), jnp.where(on_board, spots, -1).astype(jnp.int32)]
  )


@partial(jax.jit, static_argnums=(1, 2, 3))
def _table_chunk(index, n, k, d):
  big = nannon.num_positions(n, k)

  def one(idx):
    mine, theirs, home_me, home_opp = unrank_position(idx, n, k)
    slots = _slot_actions(mine, k)

    def move(roll, action):
      legal = legal_all[roll - 1][jnp.maximum(action, 0)] & (action >= 0)
      m2, t2, h_me, h_opp = nannon.apply_move(
        mine, theirs, home_me, home_opp, roll, jnp.maximum(action, 0)
      )
      nxt = rank_position(t2[::-1], m2[::-1], h_opp, h_me, k)
      return jnp.where(legal, nxt, big)

    rolls = jnp.arange(1, d + 1)
    legal_all = jax.vmap(lambda r: nannon.legal_moves(mine, theirs, home_me, r))(rolls)
    succ = jax.vmap(lambda r: jax.vmap(lambda a: move(r, a))(slots))(rolls)
    flip = rank_position(theirs[::-1], mine[::-1], home_opp, home_me, k)
    lost = (home_opp == 0) & ~jnp.any(theirs)
    won = (home_me == 0) & ~jnp.any(mine)
    return succ, slots, flip, lost, won

  return jax.vmap(one)(index)


@lru_cache(maxsize=4)
def build_tables(points: int, checkers: int, die_sides: int, chunk: int = 1 << 16) -> Tables:
  """The move graph of a configuration (cached in memory)."""
  n, k, d = points, checkers, die_sides
  num = nannon.num_positions(n, k)
  if num > MAX_SOLVER_POSITIONS:
    raise ValueError(
      f"nannon {n}-{k}-{d} has {num:,} positions; the solver "
      f"handles at most {MAX_SOLVER_POSITIONS:,}"
    )
  chunk = min(chunk, num)
  parts = []
  for lo in range(0, num, chunk):
    idx = np.arange(lo, lo + chunk, dtype=np.int32)
    idx = np.minimum(idx, num - 1)  # fixed chunk shape: one compilation
    out = jax.device_get(_table_chunk(jnp.asarray(idx), n, k, d))
    parts.append([np.asarray(x)[: min(chunk, num - lo)] for x in out])
  succ, slots, flip, lost, won = (np.concatenate(xs) for xs in zip(*parts))
  return Tables(
    n, k, d, succ.astype(np.int32), slots.astype(np.int32), flip.astype(np.int32), lost, won
  )


# --------------------------------------------------- decision enumeration ----


def decision_index(env: Optional[Env] = None) -> Tuple[np.ndarray, np.ndarray]:
  """All (position, roll) pairs where the mover has a decision.

  Returns (positions int32 `[M]`, rolls int32 `[M]`, rolls in 1..d), sorted by
  position then roll.
  """
  n, k, d = config_of(env)
  pos, roll = np.nonzero(build_tables(n, k, d).decision)
  return pos.astype(np.int32), (roll + 1).astype(np.int32)


def decision_states(
  env: Optional[Env] = None, first: int = 0, count: Optional[int] = None
) -> Tuple[State, np.ndarray, np.ndarray]:
  """A batch of decision states, as `envs.State`s at decision nodes.

  Args:
    env: a nannon env (default 6-3-6).
    first, count: the slice `[first, first + count)` of `decision_index`
      (default: all of them; 12-5-6 has about 9M, so slice it).

  Returns:
    (states: `envs.State` batched `[B]`, player 0 to move with the die shown,
    positions int32 `[B]`, rolls int32 `[B]`).
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = config_of(env)
  pos, roll = decision_index(env)
  stop = len(pos) if count is None else min(len(pos), first + count)
  if not 0 <= first <= stop:
    raise ValueError(f"first={first} outside 0..{len(pos)}")
  pos, roll = pos[first:stop], roll[first:stop]
  return position_states(env, pos, roll), pos, roll


def position_states(env: Env, positions, rolls) -> State:
  """`envs.State`s batched `[B]` for positions int `[B]` and rolls int `[B]`.

  Player 0 is the mover. A roll r in 1..d gives the decision node after that
  roll (the caller makes sure a move is legal); roll 0 gives the mover's
  die-roll chance node.
  """
  config_of(env)
  build = _state_builder(tuple(sorted(env.params.items())))
  return build(jnp.asarray(positions, jnp.int32), jnp.asarray(rolls, jnp.int32))


@lru_cache(maxsize=8)
def _state_builder(params: Tuple[Tuple[str, object], ...]):
  """A jitted (positions, rolls) -> State for one configuration (compiled once)."""
  env = envs.make("nannon", **dict(params))
  n, k = env.params["points"], env.params["checkers"]

  @jax.jit
  def build(pos, roll):
    def one(p, r):
      mine, theirs, home_me, home_opp = unrank_position(p, n, k)
      g = nannon.NannonState(
        board=jnp.stack([mine, theirs[::-1]]),
        home=jnp.stack([home_me, home_opp]),
        mover=jnp.int32(0),
        phase=jnp.where(r > 0, nannon.DECIDE, nannon.ROLL).astype(jnp.int32),
        die=r.astype(jnp.int32),
      )
      # The Env's own constructor keeps every derived field consistent.
      return env._make_state(
        g, rewards=jnp.zeros((2,), jnp.float32), step_count=jnp.int32(0), illegal=jnp.bool_(False)
      )

    return jax.vmap(one)(pos, roll)

  return build


def _chunked(arrays: Tuple[np.ndarray, ...], batch_size: int) -> Tuple[np.ndarray, ...]:
  """Each `[M]` array as `[chunks, batch]`, `batch = min(batch_size, M)`, the
  last chunk padded with copies of the last entry (one shape, one
  compilation; the caller drops the padding)."""
  if batch_size < 1:
    raise ValueError(f"batch_size must be >= 1, got {batch_size}")
  size = len(arrays[0])
  batch = min(batch_size, size)
  chunks = -(-size // batch)
  pad = chunks * batch - size
  return tuple(np.pad(a, (0, pad), mode="edge").reshape(chunks, batch) for a in arrays)


def slot_to_action(slot_action: jax.Array, slots: jax.Array) -> jax.Array:
  """int32 `[N, d]`: the env action of each chosen slot `[N, d]` (`slot_action`
  `[N, k+1]`)."""
  wide = jnp.broadcast_to(slot_action[:, None, :], slots.shape + slot_action.shape[-1:])
  return jnp.take_along_axis(wide, slots[..., None], -1)[..., 0]


def policy_table_from_fn(
  env: Optional[Env], act: Callable[[State], jax.Array], batch_size: int = 1 << 13
) -> np.ndarray:
  """The move table of a batched player, e.g. an agent's greedy policy.

  All decision states are visited on device in one jitted loop (`lax.map`
  over chunks of `batch_size`; the last chunk padded with copies of the last
  state): the (position, roll) list goes to the device once and the table
  comes back once, with no host round trip per chunk (12-5-6 has about 9M
  decision states).

  Args:
    env: a nannon env (None: 6-3-6).
    act: maps a batched `State` `[B]` (decision nodes) to int actions `[B]`;
      it must be traceable (it is called inside `jax.jit`).
    batch_size: states per call of `act` (memory against loop overhead).
  Returns:
    int8 `[N, d]`, -1 where there is no decision.
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = config_of(env)
  pos, roll = decision_index(env)
  size = len(pos)
  p, r = _chunked((pos, roll), batch_size)
  build = _state_builder(tuple(sorted(env.params.items())))

  @jax.jit
  def run(p, r):
    return jax.lax.map(lambda pr: act(build(*pr)).astype(jnp.int8), (p, r))

  actions = np.asarray(jax.device_get(run(jnp.asarray(p), jnp.asarray(r)))).reshape(-1)[:size]
  table = np.full((nannon.num_positions(n, k), d), -1, np.int8)
  table[pos, roll - 1] = actions
  return table


def one_ply_table(
  env: Optional[Env], policy: OnePlyPolicy, batch_size: int = 1 << 13
) -> np.ndarray:
  """The move table of an `envs.OnePlyPolicy`, from one value per position.

  The policy values each move by the state it reaches: a roll node of the
  opponent (or the end of the game). That state depends only on the
  successor position, so `policy.successor_value` runs once per position
  (`N` calls, on the roll node `position_states(p, 0)`, from the view of the
  player who just moved) instead of once per (decision, action): 1.8M
  instead of about 100M for 12-5-6, and each of those values averages its
  own chance outcomes. A move's value is then `reward + discount * value`,
  the reward 1 for a move that wins (its value 0), as `OnePlyPolicy`
  computes it, and the first legal slot of highest value wins (slots are in
  action order). Nannon's observation is relative to the viewer, so the
  values are those the policy computes on the real successors, bit for bit
  (`tests/test_nannon_solver.py` checks the whole table against
  `policy_table_from_fn(env, policy)`).

  Returns:
    int8 `[N, d]`, -1 where there is no decision (as `policy_table_from_fn`).
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = config_of(env)
  t = build_tables(n, k, d)
  num = t.num_positions
  (p,) = _chunked((np.arange(num, dtype=np.int32),), batch_size)
  build = _state_builder(tuple(sorted(env.params.items())))

  @jax.jit
  def values(p):
    # Player 0 is to roll in `position_states(p, 0)`: player 1 moved into it.
    return jax.lax.map(
      lambda q: policy.successor_value(build(q, jnp.zeros_like(q)), jnp.ones_like(q)), p
    )

  @jax.jit
  def choose(u, succ, lost, slot_action):
    legal = succ < num
    nxt = jnp.minimum(succ, num - 1)
    wins = lost[nxt]
    r = jnp.where(wins, 1.0, 0.0).astype(jnp.float32)
    v = jnp.where(wins, 0.0, u[nxt]).astype(jnp.float32)
    q = jnp.where(legal, r + policy.discount * v, -jnp.inf)
    return slot_to_action(slot_action, jnp.argmax(q, -1))

  u = values(jnp.asarray(p)).reshape(-1)[:num]
  action = np.asarray(jax.device_get(choose(u, t.succ, t.lost, t.slot_action)))
  return np.where(t.decision, action, -1).astype(np.int8)
