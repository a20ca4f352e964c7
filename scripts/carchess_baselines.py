"""Carchess baselines: mean +- std score of the jittable policies.

Plays `--games` games per policy (default 1,000) with both players following
the policy and chance sampled from its distribution, all games vmapped in one
jitted scan. The score is the cumulative reward of one player (thesis VI-C;
both players get the same reward). Reports mean +- sample std (ddof=1) and the
standard error of the mean.

    python scripts/carchess_baselines.py                   # thesis Table 2 settings
    python scripts/carchess_baselines.py --games 200 --seed 1 --policy greedy

This is a measurement, not a test.
"""

from __future__ import annotations

import argparse
import time

import jax
import numpy as np

import envs
from envs import carchess_players


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--games", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--policy", nargs="*", default=list(carchess_players.POLICIES),
                      choices=carchess_players.POLICIES)
  parser.add_argument("--map", default="tutorial")
  args = parser.parse_args()
  if args.games < 2:
    parser.error("--games must be >= 2")
  env = envs.make("carchess", map=args.map)
  print(f"{env!r}\njax {jax.__version__} on {jax.devices()[0].platform}; "
        f"{args.games} games per policy, seed {args.seed}\n")
  print(f"{'policy':<10}{'mean':>8}{'std':>8}{'sem':>7}{'min':>6}{'max':>6}{'s':>7}")
  for name in args.policy:
    policy = carchess_players.make_policy(env, name)
    run = jax.jit(lambda key, p=policy: carchess_players.play(env, p, key, args.games))
    t0 = time.perf_counter()
    scores = np.asarray(jax.block_until_ready(run(jax.random.key(args.seed))))
    dt = time.perf_counter() - t0
    mean, std = scores.mean(), scores.std(ddof=1)
    print(f"{name:<10}{mean:>8.2f}{std:>8.2f}{std / np.sqrt(len(scores)):>7.2f}"
          f"{scores.min():>6.0f}{scores.max():>6.0f}{dt:>7.1f}")
  print("\nscore: one player's summed reward over the game (+2 per car through, "
        "-1 per crash count). Thesis: MuZero 61.02 +- 15.54, humans about 80-90.")


if __name__ == "__main__":
  main()
