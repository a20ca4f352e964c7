"""Solves Nannon exactly and prints the headline figures.

    anakin-mz solve-nannon --config 6-3-6
    anakin-mz solve-nannon --config 12-5-6            # cached after the first run
    anakin-mz solve-nannon --config 12-5-6 --no-cache # time a fresh solve
    anakin-mz solve-nannon --config 12-6-6 --force    # beyond the time limit

First prints the position count (eq. (2) of the NDMZ paper) and the
estimated time of the solve (`envs.nannon_solver.estimate`), and refuses a
solve estimated to take longer than `MAX_ESTIMATED_SECONDS` (10 minutes)
unless --force (a cached solution is read, not solved). Then the solve time
(move tables + value iteration, JIT compilation included), the Bellman residual,
the optimal-vs-optimal first-mover win probability and the optimal player's
exact win rate against a uniformly random player (both seats, opening roll
averaged), plus a simulated check of the latter with --games (the match loop
of `anakin_mz.eval.match`).
"""

from __future__ import annotations

import re
import sys
import time

import envs
from envs import nannon_solver as ns
from anakin_mz.cli import options


def simulate(env, games: int, seed: int) -> dict:
  """Optimal vs random, each in both seats: the optimal player's win rate
  with its 95% Wilson interval (`anakin_mz.eval`)."""
  import jax

  import envs.bots
  from anakin_mz.eval import match, stats

  _, optimal = envs.bots.make_bot("optimal", env)
  result = jax.jit(lambda k: match.play_match(env, optimal, envs.random_policy, k, games))(
    jax.random.PRNGKey(seed)
  )
  return stats.win_draw_loss(jax.device_get(result.score))["win"]


def _duration(seconds: float) -> str:
  """`seconds` as a rough duration: "40 s", "5.3 min", "49 h"."""
  if seconds < 100:
    return f"{seconds:.0f} s"
  if seconds < 6000:
    return f"{seconds / 60:.1f} min"
  return f"{seconds / 3600:.0f} h"


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--config", default="6-3-6", help="points-checkers-die_sides, e.g. 6-3-6 or 12-5-6"
  )
  parser.add_argument(
    "--no-cache",
    action="store_true",
    help="solve even if a cached solution exists (and overwrite it)",
  )
  parser.add_argument(
    "--tol", type=float, default=1e-12, help="value iteration stops when a sweep changes less"
  )
  parser.add_argument(
    "--games", type=int, default=0, help="also simulate this many optimal-vs-random games (even)"
  )
  parser.add_argument("--seed", type=int, default=0, help="seed of the simulated games")
  parser.add_argument(
    "--force",
    action="store_true",
    help=f"solve even if the estimate exceeds {ns.MAX_ESTIMATED_SECONDS / 60:g} minutes",
  )
  args = parser.parse_args(argv)
  if args.games < 0 or args.games % 2:
    parser.error(f"--games must be an even number >= 0, got {args.games}")
  m = re.fullmatch(r"(\d+)-(\d+)-(\d+)", args.config)
  if not m:
    parser.error(f"--config must look like 6-3-6, got {args.config!r}")
  n, k, d = map(int, m.groups())
  try:
    env = envs.make("nannon", points=n, checkers=k, die_sides=d)
  except ValueError as e:
    parser.error(str(e))

  cost = ns.estimate(n, k, d)
  print(
    f"nannon {n}-{k}-{d}: {cost.positions:,} positions; solve estimated at "
    f"{_duration(cost.seconds)} on one core ({cost.sweeps} sweeps of {cost.entries:,} moves)",
    flush=True,
  )
  solving = args.no_cache or not ns.is_cached(env)
  if solving and cost.seconds > ns.MAX_ESTIMATED_SECONDS and not args.force:
    print(
      f"error: nannon {n}-{k}-{d} is estimated to take {_duration(cost.seconds)} to solve, "
      f"beyond the limit of {_duration(ns.MAX_ESTIMATED_SECONDS)}; pass --force to solve it",
      file=sys.stderr,
    )
    return 2
  try:
    sol = ns.solve(env, tol=args.tol, refresh=args.no_cache)
  except ValueError as e:  # beyond what the solver handles (memory)
    print(f"error: {e}", file=sys.stderr)
    return 2
  where = " (from the cache; time of the run that wrote it)" if sol.from_cache else ""
  cpu = f" ({sol.cpu_seconds:.1f} s CPU)" if sol.cpu_seconds else ""
  print(
    f"solve time: {sol.seconds:.1f} s wall{cpu}{where}, {sol.iterations} sweeps, "
    f"Bellman residual {sol.residual:.1e}",
    flush=True,
  )
  print(
    f"optimal vs optimal: first mover wins with probability "
    f"{ns.first_mover_win_probability(env):.6f}",
    flush=True,
  )
  t0 = time.perf_counter()
  vs_random = ns.exact_win_probability(sol.policy, "random", env)
  print(
    f"optimal vs random: optimal wins {vs_random.win_probability:.6f} "
    f"(moving first {vs_random.when_starting:.6f}, second "
    f"{vs_random.when_second:.6f}); exact policy evaluation, "
    f"{time.perf_counter() - t0:.1f} s"
  )
  if args.games:
    win = simulate(env, args.games, args.seed)
    print(
      f"simulated optimal vs random over {args.games} games (both seats): "
      f"{win['rate']:.4f} [{win['low']:.4f}, {win['high']:.4f}] (95% Wilson)"
    )
  return 0
