"""Solves Nannon exactly and prints the headline figures.

    python scripts/solve_nannon.py --config 6-3-6
    python scripts/solve_nannon.py --config 12-5-6            # cached after the first run
    python scripts/solve_nannon.py --config 12-5-6 --no-cache # time a fresh solve

Prints the position count (eq. (2) of the NDMZ paper), the solve time (move
tables + value iteration, JIT compilation included), the Bellman residual,
the optimal-vs-optimal first-mover win probability and the optimal player's
exact win rate against a uniformly random player (both seats, opening roll
averaged), plus a simulated check of the latter with --games.
"""

from __future__ import annotations

import argparse
import re
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs import nannon
from envs import nannon_solver as ns


def simulate(env, table, games: int, seed: int) -> float:
  """Optimal (player 0) vs random (player 1): player 0's win rate."""
  optimal = ns.TablePolicy(table=jnp.asarray(table), checkers=env.params["checkers"])

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.reset)(jax.random.split(k0, games))

    def body(c):
      s, total, k = c
      k, ka, kb, kc = jax.random.split(k, 4)
      a = jnp.where(s.current_player == 0, jax.vmap(optimal)(s),
                    jax.vmap(ns.random_policy)(s, jax.random.split(ka, games)))
      s = jax.vmap(env.step)(s, a, jax.random.split(kc, games))
      return s, total + s.rewards[:, 0], k

    _, total, _ = jax.lax.while_loop(lambda c: ~jnp.all(c[0].done), body,
                                     (s, jnp.zeros((games,)), k1))
    return total

  return float(np.mean(jax.device_get(run(jax.random.key(seed))) > 0))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--config", default="6-3-6",
                      help="points-checkers-die_sides, e.g. 6-3-6 or 12-5-6")
  parser.add_argument("--no-cache", action="store_true",
                      help="solve even if a cached solution exists (and overwrite it)")
  parser.add_argument("--tol", type=float, default=1e-12,
                      help="value iteration stops when a sweep changes less")
  parser.add_argument("--games", type=int, default=0,
                      help="also simulate this many optimal-vs-random games")
  args = parser.parse_args()
  m = re.fullmatch(r"(\d+)-(\d+)-(\d+)", args.config)
  if not m:
    parser.error(f"--config must look like 6-3-6, got {args.config!r}")
  n, k, d = map(int, m.groups())
  try:
    env = envs.make("nannon", points=n, checkers=k, die_sides=d)
  except ValueError as e:
    parser.error(str(e))

  print(f"nannon {n}-{k}-{d}: {nannon.num_positions(n, k):,} positions", flush=True)
  sol = ns.solve(env, tol=args.tol, refresh=args.no_cache)
  where = " (from the cache; time of the run that wrote it)" if sol.from_cache else ""
  cpu = f" ({sol.cpu_seconds:.1f} s CPU)" if sol.cpu_seconds else ""
  print(f"solve time: {sol.seconds:.1f} s wall{cpu}{where}, {sol.iterations} sweeps, "
        f"Bellman residual {sol.residual:.1e}", flush=True)
  print(f"optimal vs optimal: first mover wins with probability "
        f"{ns.first_mover_win_probability(env):.6f}", flush=True)
  t0 = time.perf_counter()
  vs_random = ns.exact_win_probability(sol.policy, "random", env)
  print(f"optimal vs random: optimal wins {vs_random.win_probability:.6f} "
        f"(moving first {vs_random.when_starting:.6f}, second "
        f"{vs_random.when_second:.6f}); exact policy evaluation, "
        f"{time.perf_counter() - t0:.1f} s")
  if args.games:
    rate = simulate(env, sol.policy, args.games, seed=0)
    se = np.sqrt(rate * (1 - rate) / args.games)
    print(f"simulated optimal vs random over {args.games} games: {rate:.4f} "
          f"+- {1.96 * se:.4f} (95% CI)")


if __name__ == "__main__":
  main()
