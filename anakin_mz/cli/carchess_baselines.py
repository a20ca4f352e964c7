"""Carchess baselines: mean +- std score of the game's bots.

Plays `--games` games per bot (default 1,000) with every player following
the bot and chance sampled from its distribution, all games in one jitted
match (`anakin_mz.eval.match`). The score is the cumulative reward of one
player (thesis VI-C; both players get the same reward). Reports mean +-
sample std (ddof=1) and the standard error of the mean.

    anakin-mz carchess-baselines                   # thesis Table 2 settings
    anakin-mz carchess-baselines --games 200 --seed 1 --bot greedy

This is a measurement, not a test.
"""

from __future__ import annotations

import sys
import time

from anakin_mz.cli import options

BOTS = ("random", "greedy")


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--games", type=int, default=1000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--bot", nargs="*", default=list(BOTS), choices=BOTS)
  parser.add_argument("--map", default="tutorial")
  args = parser.parse_args(argv)
  if args.games < 2:
    parser.error("--games must be >= 2")
  import jax
  import numpy as np

  import envs
  import envs.bots
  from anakin_mz.eval import match

  try:
    env = envs.make("carchess", map=args.map)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(
    f"{env!r}\njax {jax.__version__} on {jax.devices()[0].platform}; "
    f"{args.games} games per bot, seed {args.seed}\n"
  )
  print(f"{'bot':<10}{'mean':>8}{'std':>8}{'sem':>7}{'min':>6}{'max':>6}{'s':>7}")
  for name in args.bot:
    _, policy = envs.bots.make_bot(name, env)
    run = jax.jit(lambda key, p=policy: match.play_match(env, p, p, key, args.games).score)
    t0 = time.perf_counter()
    scores = np.asarray(jax.block_until_ready(run(jax.random.PRNGKey(args.seed))))
    dt = time.perf_counter() - t0
    mean, std = scores.mean(), scores.std(ddof=1)
    print(
      f"{name:<10}{mean:>8.2f}{std:>8.2f}{std / np.sqrt(len(scores)):>7.2f}"
      f"{scores.min():>6.0f}{scores.max():>6.0f}{dt:>7.1f}"
    )
  print(
    "\nscore: one player's summed reward over the game (+2 per car through, "
    "-1 per crash count). Thesis: MuZero 61.02 +- 15.54, humans about 80-90."
  )
  return 0
