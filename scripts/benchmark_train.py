"""Profile one Anakin step: self-play that searches only at decision nodes
beside the old path that searches at every node, in one process.

    python scripts/benchmark_train.py --env nannon
    taskset -c 1 python scripts/benchmark_train.py --env einstein --repeats 7
    python scripts/benchmark_train.py --env nannon search.num_simulations=32

Prints the time of each jitted piece of the step (rollout, search, replay add
and prepare, sampling, updates) and the end-to-end env transitions/s,
searches/s, simulations/s and updates/s of the whole step, for both paths,
with their ratio (medians over repeats, the paths taking turns). The config
is the env's own (`anakin_mz.config.load_for_env`) unless --config names a
YAML file or a shipped config; `section.key=value` arguments override it
(both paths). See `anakin_mz/experiments/profiling.py`.
"""

from __future__ import annotations

import sys

from anakin_mz import config as config_lib
from anakin_mz.cli import options


def main(argv=None) -> int:
  parser = options.parser(__doc__, None)
  options.add_env_config(parser)
  parser.add_argument("--repeats", type=int, default=5, help="timed calls per piece (median)")
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)

  if args.repeats < 1:
    parser.error("--repeats must be >= 1")
  if any(o.split("=", 1)[0].strip() == "train.search_at_chance" for o in args.overrides):
    parser.error("train.search_at_chance is set by the benchmark (it runs both paths)")
  from anakin_mz import agents  # noqa: F401 (registers every agent)

  configs = []
  try:
    for name, flag in (("decisions", "false"), ("everywhere", "true")):
      overrides = list(args.overrides) + [f"train.search_at_chance={flag}"]
      configs.append((name, config_lib.load_for_env(args.env, args.config, overrides)[0]))
  except ValueError as e:
    parser.error(str(e))

  from anakin_mz.experiments import profiling
  import jax

  log = lambda msg: print(msg, file=sys.stderr, flush=True)
  try:
    profiles = profiling.profile(configs, repeats=args.repeats, seed=args.seed, log=log)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  tc = configs[0][1].train
  print(
    f"{args.env}: {jax.devices()[0].platform} x{len(jax.devices())}, num_envs "
    f"{tc.num_envs}, rollout_length {tc.rollout_length}, "
    f"{configs[0][1].search.num_simulations} simulations, batch {tc.batch_size}, "
    f"replay_ratio {tc.replay_ratio}; medians of {args.repeats} calls"
  )
  print(
    "paths: decisions = search only at decision nodes (default); "
    "everywhere = train.search_at_chance=true"
  )
  print(profiling.report(profiles))
  return 0


if __name__ == "__main__":
  sys.exit(main())
