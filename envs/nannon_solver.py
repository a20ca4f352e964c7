"""Exact solution of Nannon: position ranking, value iteration, optimal and
an optimal player, and exact evaluation of any deterministic policy.

A *position* is the board seen by the player about to roll ("the mover"):
`mine`, `theirs` (bool `[n]`, on the mover's spots 1..n), `home_me`,
`home_opp` (SAFETY is the rest). `rank_position` maps it to `0..N-1`, with N
from the NDMZ paper's eq. (2) (`envs.nannon.num_positions`: 2,530 for 6-3-6,
1,780,776 for 12-5-6); `unrank_position` is its inverse. Both are jittable.

Typical use:

    import envs
    from envs import nannon_solver as ns
    env = envs.make("nannon")                   # or points=12, checkers=5
    sol = ns.solve(env)                          # cached on disk when large
    sol.values[p]       # float64: P(mover wins) at position p, before the roll
    sol.policy[p, r-1]  # int8: optimal action with roll r (-1: no decision)
    act = ns.optimal_policy(env)                 # jittable: act(state, key), unbatched
    ev = ns.exact_win_probability(table, "optimal", env)   # or "random"
    ns.first_mover_win_probability(env)          # optimal vs optimal

Scoring an agent exactly: build its greedy move table with one batched network
call per chunk of decision states, then evaluate it:

    table = ns.policy_table_from_fn(env, lambda states: my_greedy(states))
    ev = ns.exact_win_probability(table, "optimal", env)
    ev.win_probability  # averaged over who starts and the opening roll

or enumerate the decision states yourself with `decision_states` (slices of
`decision_index`), or build states for any (position, roll) with
`position_states`; `state_position` ranks the position of a `State`.

Policy tables: int `[N, d]`, entry `[p, r-1]` is the action (the env's action
encoding: 0 enters from HOME, s moves the checker on spot s) at position p
with roll r. Entries where there is no decision (the game is over, or no move
is legal and the turn is forfeited) are ignored.

Solver: value iteration in float64 (`jax.enable_x64` only inside this module's
functions) over a successor table `[N, d, k+1]`: a position has at most k+1
distinct moves (HOME, and each checker on the board), "slots" here.
V(p) = mean_r max_slot (1 - V(successor)); a forfeited roll gives
1 - V(same board seen by the opponent). Large solutions are cached under
$ANAKIN_MZ_CACHE (default ~/.cache/anakin_mz/), keyed by the configuration,
the env's version and `SOLVER_VERSION`, with a checksum.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import time
import warnings
from functools import lru_cache, partial
from typing import Callable, NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import envs
from envs import nannon
from envs.core import Env, State
from envs.policy import OnePlyPolicy

# Solutions with at least this many positions are cached on disk.
CACHE_MIN_POSITIONS = 100_000
# The solver refuses configurations larger than this (memory: ~150 B each).
MAX_SOLVER_POSITIONS = 20_000_000
# `anakin-mz solve-nannon` refuses a solve estimated to take longer, unless
# forced (12-5-6 and 9-9-9 take about 5 minutes).
MAX_ESTIMATED_SECONDS = 600.0


class Estimate(NamedTuple):
  """What solving a configuration costs (`estimate`): `positions` (N),
  `entries` of the move table (N x d rolls x k+1 moves, what each sweep
  reads), value-iteration `sweeps` and `seconds` on one CPU core."""

  positions: int
  entries: int
  sweeps: int
  seconds: float


def estimate(points: int, checkers: int, die_sides: int) -> Estimate:
  """The states and time of `solve` for a configuration, before solving.

  A model fitted to solves timed on one core of a 2-core CPU host (6-3-6,
  8-4-6, 6-6-6, 10-4-6 and 9-9-9, from 8 s to about 5 minutes; 12-5-6 takes
  about 5): ~8 s of compilation, 3.7 us per (position, roll) to build the
  move table, and 22 ns per table entry per sweep, with 40 + 6 L sweeps for
  games of L = k (n + 1) / mean roll turns a side (68 to 145 measured). Good
  to a factor of about 1.5; a loaded machine is slower.
  """
  n, k, d = points, checkers, die_sides
  positions = nannon.num_positions(n, k)
  entries = positions * d * (k + 1)
  sweeps = round(40 + 6 * k * (n + 1) / ((d + 1) / 2))
  seconds = 8.0 + 3.7e-6 * positions * d + 22e-9 * entries * sweeps
  return Estimate(positions, entries, sweeps, seconds)


def _config(env: Optional[Env]) -> Tuple[int, int, int]:
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


# ----------------------------------------------------------------- solver ----


@dataclasses.dataclass(frozen=True)
class Solution:
  """values: float64 `[N]`, P(the mover wins) before its roll; policy: int8
  `[N, d]`, the optimal action per (position, roll), -1 with no decision
  (ties go to the lowest action); residual: max |T V - V|; iterations and
  seconds, cpu_seconds: wall and process CPU time of the solve (tables and
  value iteration, compilation included) that produced it;
  from_cache: loaded from disk rather than solved now."""

  points: int
  checkers: int
  die_sides: int
  values: np.ndarray
  policy: np.ndarray
  residual: float
  iterations: int
  seconds: float
  cpu_seconds: float = 0.0
  from_cache: bool = False


def _bellman(v, succ, flip, lost, won):
  """T V and the Q values `[N, d, k+1]` (float64 under enable_x64)."""
  v_ext = jnp.concatenate([v, jnp.full((1,), 2.0, v.dtype)])  # illegal: Q = -1
  q = 1.0 - v_ext[succ]
  legal = succ < v.shape[0]
  best = jnp.max(q, -1)
  best = jnp.where(legal.any(-1), best, (1.0 - v[flip])[:, None])
  tv = jnp.mean(best, -1)
  tv = jnp.where(lost, 0.0, jnp.where(won, 1.0, tv))
  return tv, q


@partial(jax.jit, static_argnames=("max_iterations",))
def _value_iteration(v, succ, flip, lost, won, tol, max_iterations):
  def cond(carry):
    _, res, it = carry
    return (res >= tol) & (it < max_iterations)

  def body(carry):
    v, _, it = carry
    tv, _ = _bellman(v, succ, flip, lost, won)
    return tv, jnp.max(jnp.abs(tv - v)), it + 1

  init = (v, jnp.asarray(jnp.inf, v.dtype), jnp.int32(0))
  return jax.lax.while_loop(cond, body, init)


@jax.jit
def _greedy(v, succ, flip, lost, won, slot_action):
  tv, q = _bellman(v, succ, flip, lost, won)
  action = _slot_to_action(slot_action, jnp.argmax(q, -1))  # first maximum: the lowest slot
  decide = (succ < v.shape[0]).any(-1) & ~(lost | won)[:, None]
  return jnp.max(jnp.abs(tv - v)), jnp.where(decide, action, -1).astype(jnp.int8)


# (points, checkers, die_sides) -> (tol, Solution): solutions of this process.
_SOLVED = {}

# Bump when the solver's output changes (ranking layout, tie-breaking, the
# file's fields): cached solutions of another version are never read.
SOLVER_VERSION = 1


class CacheError(ValueError):
  """A cached solution that cannot be used (unreadable, or not the solution
  of this configuration, env version and solver version)."""


def cache_dir() -> str:
  """Where large solutions are cached: $ANAKIN_MZ_CACHE, else
  ~/.cache/anakin_mz."""
  return os.environ.get(
    "ANAKIN_MZ_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "anakin_mz")
  )


def is_cached(env: Optional[Env] = None) -> bool:
  """Whether `solve(env)` finds a cache file (it may still prove unusable)."""
  return os.path.exists(_cache_path(*_config(env)))


def _cache_path(n: int, k: int, d: int) -> str:
  name = f"nannon_{n}-{k}-{d}_env{nannon.Nannon.version}_solver{SOLVER_VERSION}.npz"
  return os.path.join(cache_dir(), name)


def _digest(values: np.ndarray, policy: np.ndarray) -> str:
  h = hashlib.sha256()
  h.update(np.ascontiguousarray(values, np.float64).tobytes())
  h.update(np.ascontiguousarray(policy, np.int8).tobytes())
  return h.hexdigest()


def _load(path: str, n: int, k: int, d: int) -> Tuple[float, Solution]:
  """(tol, Solution) from a cache file; CacheError if it is unreadable or
  not this configuration's solution (versions, shapes, checksum)."""
  num = nannon.num_positions(n, k)
  try:
    with np.load(path, allow_pickle=False) as z:
      f = {name: z[name] for name in z.files}
  except Exception as e:  # a truncated or overwritten file: zip, npy or OS errors
    raise CacheError(f"cannot read cached nannon solution {path!r}: {e}") from None
  want = {
    "config": [n, k, d],
    "env_version": nannon.Nannon.version,
    "solver_version": SOLVER_VERSION,
  }
  fields = {"values", "policy", "digest", "tol", "residual", "iterations", "seconds", "cpu_seconds"}
  missing = sorted((set(want) | fields) - set(f))
  if missing:
    raise CacheError(f"cached nannon solution {path!r} lacks {missing} (an older format?)")
  for name, value in want.items():
    if f[name].tolist() != value:
      raise CacheError(
        f"cached nannon solution {path!r} has {name} {f[name].tolist()}, expected {value}"
      )
  values, policy = f["values"], f["policy"]
  if values.shape != (num,) or values.dtype != np.float64:
    raise CacheError(f"cached values in {path!r}: {values.dtype}{values.shape}, not float64[{num}]")
  if policy.shape != (num, d) or policy.dtype != np.int8:
    raise CacheError(
      f"cached policy in {path!r}: {policy.dtype}{policy.shape}, not int8[{num}, {d}]"
    )
  if _digest(values, policy) != str(f["digest"]):
    raise CacheError(f"cached nannon solution {path!r} fails its checksum (corrupt)")
  sol = Solution(
    n,
    k,
    d,
    values,
    policy,
    float(f["residual"]),
    int(f["iterations"]),
    float(f["seconds"]),
    float(f["cpu_seconds"]),
    True,
  )
  return float(f["tol"]), sol


def solve(
  env: Optional[Env] = None,
  tol: float = 1e-12,
  max_iterations: int = 100_000,
  cache: Optional[bool] = None,
  refresh: bool = False,
) -> Solution:
  """Solves a nannon configuration exactly by value iteration.

  Args:
    env: an env from `envs.make("nannon", ...)` (default 6-3-6); only points,
      checkers and die_sides matter (the solution covers every position).
    tol: stop when successive sweeps differ by less than this (sup norm).
    max_iterations: a bound on sweeps.
    cache: read/write the solution in `cache_dir()`, in a file named by the
      configuration, the env's version and `SOLVER_VERSION`. None: only for
      N >= CACHE_MIN_POSITIONS. A cache file that cannot be used (corrupt,
      of another version or configuration, solved to a looser tol) is
      replaced by a fresh solve, with a warning naming it.
    refresh: solve even if a cached solution exists (and rewrite it).
      Without it, a solution already computed in this process is reused.

  Returns:
    A `Solution`; its `residual` is the Bellman residual of `values`.
  """
  n, k, d = _config(env)
  num = nannon.num_positions(n, k)
  if cache is None:
    cache = num >= CACHE_MIN_POSITIONS
  path = _cache_path(n, k, d)
  memo = _SOLVED.get((n, k, d))
  if not refresh and memo is not None and memo[0] <= tol:
    if cache and not os.path.exists(path):
      _save(path, memo[1], memo[0])
    return memo[1]
  if cache and not refresh and os.path.exists(path):
    try:
      cached_tol, sol = _load(path, n, k, d)
    except CacheError as e:
      warnings.warn(f"{e}; solving again and rewriting it", stacklevel=2)
    else:
      if cached_tol <= tol:
        _SOLVED[(n, k, d)] = (cached_tol, sol)
        return sol
  t0, c0 = time.perf_counter(), time.process_time()
  t = build_tables(n, k, d)
  with jax.enable_x64(True):
    args = (jnp.asarray(t.succ), jnp.asarray(t.flip), jnp.asarray(t.lost), jnp.asarray(t.won))
    v0 = jnp.where(args[3], 1.0, 0.0).astype(jnp.float64)
    v, _, it = _value_iteration(v0, *args, jnp.float64(tol), max_iterations)
    residual, policy = _greedy(v, *args, jnp.asarray(t.slot_action))
    v, residual, policy = jax.device_get((v, residual, policy))
  seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
  sol = Solution(
    n, k, d, np.asarray(v, np.float64), np.asarray(policy), float(residual), int(it), seconds, cpu
  )
  _SOLVED[(n, k, d)] = (tol, sol)
  if cache:
    _save(path, sol, tol)
  return sol


def _save(path: str, sol: Solution, tol: float) -> None:
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = f"{path}.{os.getpid()}.tmp.npz"  # atomic: write, then rename
  np.savez(
    tmp,
    config=np.array([sol.points, sol.checkers, sol.die_sides]),
    env_version=nannon.Nannon.version,
    solver_version=SOLVER_VERSION,
    values=sol.values,
    policy=sol.policy,
    digest=_digest(sol.values, sol.policy),
    residual=sol.residual,
    tol=tol,
    iterations=sol.iterations,
    seconds=sol.seconds,
    cpu_seconds=sol.cpu_seconds,
  )
  os.replace(tmp, path)


# ---------------------------------------------------------------- players ----


@struct.dataclass
class TablePolicy:
  """A deterministic player that looks its move up in a policy table.

  table: int `[N, d]` (see the module docstring). Call it as
  `policy(state, key)` on one unbatched nannon `State` (vmap for a batch); it
  returns int32 `[]` (0 off decision nodes). It is a pytree: pass it into
  jitted functions as an argument.
  """

  table: jax.Array
  checkers: int = struct.field(pytree_node=False)

  def __call__(self, state: State, key: Optional[jax.Array] = None) -> jax.Array:
    del key
    pos = state_position(state, self.checkers)
    roll = jnp.clip(state.game.die - 1, 0, self.table.shape[1] - 1)
    a = self.table[pos, roll].astype(jnp.int32)
    return jnp.where(state.current_player >= 0, jnp.maximum(a, 0), 0)


def optimal_policy(env: Optional[Env] = None) -> TablePolicy:
  """The optimal player of `env`'s configuration (solves or loads the cache)."""
  n, k, d = _config(env)
  sol = solve(env)
  return TablePolicy(table=jnp.asarray(sol.policy), checkers=k)


# --------------------------------------------------- decision enumeration ----


def decision_index(env: Optional[Env] = None) -> Tuple[np.ndarray, np.ndarray]:
  """All (position, roll) pairs where the mover has a decision.

  Returns (positions int32 `[M]`, rolls int32 `[M]`, rolls in 1..d), sorted by
  position then roll.
  """
  n, k, d = _config(env)
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
  n, k, d = _config(env)
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
  _config(env)
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


def _slot_to_action(slot_action: jax.Array, slots: jax.Array) -> jax.Array:
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
  n, k, d = _config(env)
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
  n, k, d = _config(env)
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
    return _slot_to_action(slot_action, jnp.argmax(q, -1))

  u = values(jnp.asarray(p)).reshape(-1)[:num]
  action = np.asarray(jax.device_get(choose(u, t.succ, t.lost, t.slot_action)))
  return np.where(t.decision, action, -1).astype(np.int8)


# ------------------------------------------------------- exact evaluation ----


class Evaluation(NamedTuple):
  """Exact result of a policy against an opponent.

  win_probability: averaged over who starts (1/2 each) and the opening roll.
  when_starting / when_second: given the evaluated policy moves first / second.
  residual: the final sup-norm change of the policy evaluation.
  """

  win_probability: float
  when_starting: float
  when_second: float
  residual: float


def _slots_of(table: np.ndarray, t: Tables) -> np.ndarray:
  """int32 `[N, d]`: the slot of each table action; raises on illegal moves."""
  num, d = t.num_positions, t.die_sides
  table = np.asarray(table)
  if table.shape != (num, d):
    raise ValueError(
      f"policy table must have shape [num_positions, die_sides] = {(num, d)}, got {table.shape}"
    )
  hit = t.slot_action[:, None, :] == table[..., None].astype(np.int32)
  hit &= t.succ < num
  slots = np.argmax(hit, -1).astype(np.int32)
  bad = t.decision & ~hit.any(-1)
  if bad.any():
    p, r = map(int, np.argwhere(bad)[0])
    raise ValueError(
      f"policy table has {int(bad.sum())} illegal entries at decision states;"
      f" e.g. position {p}, roll {r + 1}: action {int(table[p, r])}, legal "
      f"actions {sorted(int(a) for a, s in zip(t.slot_action[p], t.succ[p, r]) if s < num)}"
    )
  return slots


@partial(jax.jit, static_argnames=("random_b", "max_iterations"))
def _evaluate(succ, flip, lost, won, slot_a, slot_b, tol, random_b, max_iterations):
  num = flip.shape[0]
  legal = succ < num
  any_legal = legal.any(-1)

  def q_fixed(w_next, slots):
    nxt = jnp.take_along_axis(succ, slots[..., None], -1)[..., 0]
    return jnp.where(any_legal, w_next[jnp.minimum(nxt, num - 1)], w_next[flip][:, None])

  def q_random(w_next):
    vals = jnp.where(legal, w_next[jnp.minimum(succ, num - 1)], 0.0)
    avg = vals.sum(-1) / jnp.maximum(legal.sum(-1), 1)
    return jnp.where(any_legal, avg, w_next[flip][:, None])

  def sweep(wa, wb):
    # wa: P(A wins) with A to roll; wb: P(A wins) with B to roll. B's half
    # reads A's new values (Gauss-Seidel between the halves): the same fixed
    # point in about half the sweeps of updating both from the old values.
    qa = q_fixed(wb, slot_a)
    wa2 = jnp.where(lost, 0.0, jnp.where(won, 1.0, qa.mean(-1)))
    qb = q_random(wa2) if random_b else q_fixed(wa2, slot_b)
    wb2 = jnp.where(lost, 1.0, jnp.where(won, 0.0, qb.mean(-1)))
    return wa2, wb2, qa, qb

  def cond(c):
    return (c[2] >= tol) & (c[3] < max_iterations)

  def body(c):
    wa, wb, _, it = c
    wa2, wb2, _, _ = sweep(wa, wb)
    res = jnp.maximum(jnp.max(jnp.abs(wa2 - wa)), jnp.max(jnp.abs(wb2 - wb)))
    return wa2, wb2, res, it + 1

  z = jnp.zeros((num,), jnp.float64)
  wa, wb, res, _ = jax.lax.while_loop(
    cond, body, (z, z, jnp.asarray(jnp.inf, jnp.float64), jnp.int32(0))
  )
  _, _, qa, qb = sweep(wa, wb)
  return qa, qb, res


def start_position(env: Optional[Env] = None) -> int:
  """The rank of the start position (the same for either starter)."""
  if env is None:
    env = envs.make("nannon")
  n, k, _ = _config(env)
  g = env.game.init(jax.random.PRNGKey(0))
  mine, theirs, home_me, home_opp = nannon.relative(g.board, g.home, 0)
  return int(rank_position(mine, theirs, home_me, home_opp, k))


def exact_win_probability(
  policy_table,
  opponent="optimal",
  env: Optional[Env] = None,
  tol: float = 1e-13,
  max_iterations: int = 100_000,
) -> Evaluation:
  """Exact win probability of a deterministic policy, by policy evaluation.

  Args:
    policy_table: int `[N, d]` actions (see the module docstring), e.g. from
      `policy_table_from_fn` or `solve(env).policy`.
    opponent: "optimal", "random" (uniform over legal moves), or another
      policy table `[N, d]`.
    env: the nannon configuration (default 6-3-6); its `start` is used.
    tol: stop when a sweep changes no probability by more than this.

  Returns:
    An `Evaluation`. The game is symmetric, so the seat does not matter; who
    starts is decided by the opening roll (1/2 each, first move m with
    probability proportional to d - m).

  Raises:
    ValueError: a wrong shape, an unknown opponent, or an illegal action at a
      decision state.
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = _config(env)
  t = build_tables(n, k, d)
  slot_a = _slots_of(policy_table, t)
  random_b = isinstance(opponent, str) and opponent == "random"
  if isinstance(opponent, str) and opponent == "optimal":
    slot_b = _slots_of(solve(env).policy, t)
  elif random_b:
    slot_b = slot_a
  elif isinstance(opponent, str):
    raise ValueError(f"opponent must be 'optimal', 'random' or a policy table, got {opponent!r}")
  else:
    slot_b = _slots_of(opponent, t)
  with jax.enable_x64(True):
    qa, qb, res = _evaluate(
      jnp.asarray(t.succ),
      jnp.asarray(t.flip),
      jnp.asarray(t.lost),
      jnp.asarray(t.won),
      jnp.asarray(slot_a),
      jnp.asarray(slot_b),
      jnp.float64(tol),
      random_b,
      max_iterations,
    )
    s0 = start_position(env)
    qa0, qb0, res = jax.device_get((qa[s0], qb[s0], res))
  m = np.arange(1, d)
  p = (d - m) / (d * (d - 1) / 2)  # P(first move m), given the starter
  first = float(np.dot(p, np.asarray(qa0)[: d - 1]))
  second = float(np.dot(p, np.asarray(qb0)[: d - 1]))
  return Evaluation(0.5 * (first + second), first, second, float(res))


def first_mover_win_probability(env: Optional[Env] = None) -> float:
  """Optimal vs optimal: P(the side that makes the first move wins).

  Read off the solved values (V is the optimal-vs-optimal win probability):
  the mean over the opening roll m of max_move (1 - V(successor)).
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = _config(env)
  sol, t = solve(env), build_tables(n, k, d)
  s0 = start_position(env)
  v_ext = np.concatenate([sol.values, [2.0]])
  total = 0.0
  for m in range(1, d):
    q = 1.0 - v_ext[t.succ[s0, m - 1]]
    best = q.max() if (t.succ[s0, m - 1] < t.num_positions).any() else 1.0 - sol.values[t.flip[s0]]
    total += (d - m) / (d * (d - 1) / 2) * best
  return float(total)
