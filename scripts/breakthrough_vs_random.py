"""MCTS (UCT with random rollouts, on mctx) against a uniformly random player
in Breakthrough, from both seats.

    python scripts/breakthrough_vs_random.py                  # 5x5, 64 and 256 sims
    python scripts/breakthrough_vs_random.py --games 500 --sims 64 --rows 6 --columns 6

For each number of simulations and each seat of MCTS (0: black, moves first;
1: white), plays `--games` games in one batch (all at once, jitted) and prints
MCTS's win rate with its standard error and the mean game length. Breakthrough
has no draws. This is an evaluation, not a test.
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.breakthrough_players import make_player


def play(env: envs.Env, num_simulations: int, mcts_seat: int, games: int,
         key: jax.Array, uct_c: float):
  """Plays `games` games of MCTS (in seat `mcts_seat`) against random.

  Returns numpy (returns `[games, 2]`, lengths `[games]`).
  """
  mcts = make_player(env, "mcts", num_simulations=num_simulations, uct_c=uct_c)
  rand = make_player(env, "random")

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, games))
    zeros = jnp.zeros((games, env.num_players), jnp.float32)

    def cond(carry):
      s, _, _, ply = carry
      return jnp.any(~s.done) & (ply < env.max_game_length)

    def body(carry):
      s, total, k, ply = carry
      k, sub = jax.random.split(k)
      # Every game starts together and moves alternate, so the mover of every
      # unfinished game at `ply` is player ply % 2: only one side thinks.
      a = jax.lax.cond(ply % 2 == mcts_seat, mcts, rand, s, sub)
      s = jax.vmap(env.step)(s, a)
      return s, total + s.rewards, k, ply + 1

    s, total, _, _ = jax.lax.while_loop(cond, body, (s, zeros, k1, jnp.int32(0)))
    return total, s.step_count, s.done

  total, lengths, done = jax.device_get(run(key))
  assert np.all(done), "a game did not finish"
  return np.asarray(total), np.asarray(lengths)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", type=int, default=200, help="games per seat")
  parser.add_argument("--sims", type=int, nargs="*", default=[64, 256])
  parser.add_argument("--rows", type=int, default=5)
  parser.add_argument("--columns", type=int, default=5)
  parser.add_argument("--uct-c", type=float, default=2.0)
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args()
  if args.games < 1:
    parser.error("--games must be >= 1")
  env = envs.make("breakthrough", rows=args.rows, columns=args.columns)

  print(f"{env!r}; {args.games} games per seat; uct_c={args.uct_c}; "
        f"jax {jax.__version__} on {jax.devices()[0].platform}\n")
  header = (f"{'MCTS sims':>9}  {'MCTS seat':<10}{'MCTS wins':>10}{'win rate':>10}"
            f"{'+/- s.e.':>10}{'mean length':>13}{'seconds':>9}")
  print(header)
  print("-" * len(header))
  key = jax.random.key(args.seed)
  for sims in args.sims:
    for seat in (0, 1):
      key, sub = jax.random.split(key)
      t0 = time.perf_counter()
      total, lengths = play(env, sims, seat, args.games, sub, args.uct_c)
      seconds = time.perf_counter() - t0
      wins = int(np.sum(total[:, seat] > 0))
      rate = wins / args.games
      se = np.sqrt(rate * (1 - rate) / args.games)
      seat_name = ("0 (black)", "1 (white)")[seat]
      print(f"{sims:>9}  {seat_name:<10}{wins:>10}{rate:>10.3f}{se:>10.3f}"
            f"{lengths.mean():>13.1f}{seconds:>9.1f}")
  print("\nseconds include compilation. Breakthrough has no draws: "
        "MCTS's losses are the rest.")


if __name__ == "__main__":
  main()
