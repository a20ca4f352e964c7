"""Exact solution of Nannon: position ranking, value iteration, optimal and
an optimal player, and exact evaluation of any deterministic policy. The
positions, their successor tables and the decision states live in
`envs.nannon_positions` (re-exported here); this module solves and
evaluates.

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
from functools import partial
from typing import NamedTuple, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

import envs
from envs import nannon
from envs.core import Env, State
from envs.nannon_positions import (
  MAX_SOLVER_POSITIONS,
  Tables,
  build_tables,
  config_of,
  decision_index,
  decision_states,
  observation_decision,
  one_ply_table,
  policy_table_from_fn,
  position_states,
  rank_position,
  slot_to_action,
  state_position,
  unrank_position,
)

# This module's API: the solver, the players and the exact evaluation, and
# the positions and tables of `envs.nannon_positions`.
__all__ = [
  "MAX_SOLVER_POSITIONS",
  "CACHE_MIN_POSITIONS",
  "MAX_ESTIMATED_SECONDS",
  "SOLVER_VERSION",
  "Estimate",
  "estimate",
  "Tables",
  "build_tables",
  "rank_position",
  "unrank_position",
  "state_position",
  "Solution",
  "CacheError",
  "cache_dir",
  "is_cached",
  "solve",
  "TablePolicy",
  "optimal_policy",
  "decision_index",
  "decision_states",
  "observation_decision",
  "decision_values",
  "position_states",
  "policy_table_from_fn",
  "one_ply_table",
  "Evaluation",
  "start_position",
  "exact_win_probability",
  "first_mover_win_probability",
]

# Solutions with at least this many positions are cached on disk.
CACHE_MIN_POSITIONS = 100_000
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
  action = slot_to_action(slot_action, jnp.argmax(q, -1))  # first maximum: the lowest slot
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
  return os.path.exists(_cache_path(*config_of(env)))


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
  n, k, d = config_of(env)
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
  n, k, d = config_of(env)
  sol = solve(env)
  return TablePolicy(table=jnp.asarray(sol.policy), checkers=k)


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
  n, k, _ = config_of(env)
  g = env.game.init(jax.random.PRNGKey(0))
  mine, theirs, home_me, home_opp = nannon.relative(g.board, g.home, 0)
  return int(rank_position(mine, theirs, home_me, home_opp, k))


def decision_values(env: Optional[Env] = None) -> np.ndarray:
  """float64 `[N, d]`: the mover's exact win probability under optimal play
  at each decision (position, roll), before the move (the best move's
  `1 - V(successor)`); NaN where there is no decision (the game is over, or
  no move is legal).
  """
  if env is None:
    env = envs.make("nannon")
  n, k, d = config_of(env)
  t = build_tables(n, k, d)
  sol = solve(env)
  with jax.enable_x64(True):
    _, q = _bellman(
      jnp.asarray(sol.values),
      jnp.asarray(t.succ),
      jnp.asarray(t.flip),
      jnp.asarray(t.lost),
      jnp.asarray(t.won),
    )
    best = np.asarray(jax.device_get(jnp.max(q, -1)))
  return np.where(t.decision, best, np.nan)


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
  n, k, d = config_of(env)
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
  n, k, d = config_of(env)
  sol, t = solve(env), build_tables(n, k, d)
  s0 = start_position(env)
  v_ext = np.concatenate([sol.values, [2.0]])
  total = 0.0
  for m in range(1, d):
    q = 1.0 - v_ext[t.succ[s0, m - 1]]
    best = q.max() if (t.succ[s0, m - 1] < t.num_positions).any() else 1.0 - sol.values[t.flip[s0]]
    total += (d - m) / (d * (d - 1) / 2) * best
  return float(total)
