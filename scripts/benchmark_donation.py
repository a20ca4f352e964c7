"""The run loop's Anakin step with its state donated, beside the same step
copying its state, in one process.

    taskset -c 1 python scripts/benchmark_donation.py --env minatar-space_invaders \
        train.replay_ratio=4 train.replay_capacity=2048
    taskset -c 1 python scripts/benchmark_donation.py --env nannon --repeats 12

Prints the median seconds of one step jitted both ways (the two taking turns
call by call) and their ratio. A step that does not donate writes a fresh
state each call, the whole replay buffer copied, so the gap grows with
`train.replay_capacity`. The config is the env's own unless --config names
one; `section.key=value` arguments override it. See
`anakin_mz/experiments/profiling.py` (`time_steps`).
"""

from __future__ import annotations

import sys

from anakin_mz import config as config_lib
from anakin_mz.cli import options


def main(argv=None) -> int:
  parser = options.parser(__doc__, None)
  options.add_env_config(parser)
  parser.add_argument("--repeats", type=int, default=6, help="timed calls of each (median)")
  args = parser.parse_args(argv)
  if args.repeats < 1:
    print("error: --repeats must be >= 1", file=sys.stderr)
    return 2
  from anakin_mz import agents  # noqa: F401 (registers every agent)

  try:
    config = config_lib.load_for_env(args.env, args.config, args.overrides)[0]
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  from anakin_mz.experiments import profiling

  t = profiling.time_steps(config, repeats=args.repeats)
  print(f"{args.env}, replay {config.train.replay_capacity} steps x {config.train.num_envs} lanes")
  print(f"copied state   {t['copied']:.4f} s/step (median of {args.repeats})")
  print(f"donated state  {t['donated']:.4f} s/step")
  print(f"ratio          {t['copied'] / t['donated']:.2f}x (copied / donated)")
  return 0


if __name__ == "__main__":
  sys.exit(main())
