"""How the Anakin step's throughput grows with the self-play lanes, and the
chain of kernels that bounds it on an accelerator.

    python scripts/benchmark_scale.py --env nannon --lanes 64 256 1024 4096 --json scale.json
    taskset -c 1 python scripts/benchmark_scale.py --env nannon --lanes 64 1024
    python scripts/benchmark_scale.py --env nannon --lanes 256 512 --devices 2
    taskset -c 0 python scripts/benchmark_scale.py --env nannon --lanes 64 --seeds 1 4 16
    python scripts/benchmark_scale.py --env nannon --lanes 64 --seeds 2 --devices 2 \
        --seed-layout seeds lanes

For each number of lanes the env's config is resized (`anakin_mz.runtime.scaling.scale`:
the batch grows with the lanes, so the updates per step and the replay
ratio stay) and one Anakin step is compiled and timed on every device; the
settings take turns (`--repeats` rounds), and the medians are printed as
env transitions/s and updates/s, with the ratio to the first setting, and
`sequential_ops`: the kernels one step runs one after another, loop bodies
times their trip counts, from the compiled program (the latency floor on a
GPU or TPU, where a step's time is that chain, not its work). `--seeds S
...` times each lane count with S seeds trained in one program (a study:
anakin_mz/runtime/seeds.py), the throughputs summed over the seeds, and
`vs 1 seed` is the ratio to one seed at the same lanes (where `--seeds`
holds 1). `--seed-layout` times a study in each layout named (`seeds`:
whole seeds on each device, `lanes`: each seed's lanes split over them,
`auto`: the run's rule; `train.seed_layout`), those that come to the same
layout on these devices once. `--json` writes the rows (lanes, seeds,
layout, devices, batch_size, env_steps_per_s, updates_per_s, step_s,
iterations, sequential_ops, unknown_loops).

On a CPU the work bounds a step, so throughput should hardly change with the
lanes; on an accelerator it should grow until the device is full.
`section.key=value` arguments override the config before it is resized.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split("\n")[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog=__doc__,
  )
  parser.add_argument("--env", required=True, help="a registered env with a config")
  parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
  parser.add_argument("--lanes", type=int, nargs="+", required=True, help="lane counts (global)")
  parser.add_argument(
    "--seeds",
    type=int,
    nargs="+",
    default=[1],
    help="seeds in one program, per lane count (default 1: a single run's step)",
  )
  parser.add_argument(
    "--seed-layout",
    nargs="+",
    default=["auto"],
    help="a study's layouts on the devices to time: auto, seeds, lanes (default auto)",
  )
  parser.add_argument("--devices", default="1", help="CPU devices: N or 'auto' (default 1)")
  parser.add_argument("--repeats", type=int, default=3, help="timed steps per setting")
  parser.add_argument("--json", default=None, help="write the rows to this file")
  args = parser.parse_intermixed_args(argv)
  if min(args.lanes) < 1 or min(args.seeds) < 1 or args.repeats < 1:
    parser.error("--lanes, --seeds and --repeats must be >= 1")

  from anakin_mz import config as config_lib
  from anakin_mz.runtime import host, scaling

  try:  # the devices before anything starts JAX
    devices = host.configure(args.devices)
    from anakin_mz import agents  # noqa: F401 (registers every agent)

    cfg, _, _ = config_lib.load_for_env(args.env, None, list(args.overrides))
    for n in args.lanes:  # every size and layout checked before anything compiles
      scaling.scale(cfg, n)
    import jax
    from anakin_mz.runtime import seeds

    for num_seeds in (s for s in args.seeds if s > 1):
      for layout in args.seed_layout:
        seeds.choose_layout(layout, num_seeds, jax.device_count(), jax.process_count())
  except ValueError as e:
    parser.error(str(e))

  from anakin_mz.experiments import profiling

  print(f"devices: {devices}", file=sys.stderr, flush=True)
  try:
    rows = profiling.scale_rows(
      cfg,
      args.lanes,
      seeds=args.seeds,
      layouts=args.seed_layout,
      repeats=args.repeats,
      log=lambda s: print(s, file=sys.stderr, flush=True),
    )
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  load = os.getloadavg()
  base = rows[0].env_steps_per_s
  print(
    f"{args.env}: medians of {args.repeats} steps per setting, round-robin; "
    f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end"
  )
  one_seed = {r.lanes: r.env_steps_per_s for r in rows if r.seeds == 1}
  print(
    f"{'lanes':>6} {'seeds':>5} {'layout':>6} {'devices':>7} {'batch':>6} {'env steps/s':>12} "
    f"{'updates/s':>10} {'step s':>7} {'iters':>6} {'seq ops':>8} {'vs first':>9} "
    f"{'vs 1 seed':>9}"
  )
  for r in rows:
    alone = f"{r.env_steps_per_s / one_seed[r.lanes]:8.2f}x" if r.lanes in one_seed else "-"
    print(
      f"{r.lanes:6d} {r.seeds:5d} {r.layout or '-':>6} {r.devices:7d} {r.batch_size:6d} "
      f"{r.env_steps_per_s:12.0f} "
      f"{r.updates_per_s:10.1f} {r.step_s:7.2f} {r.iterations:6.1f} {r.sequential_ops:8d} "
      f"{r.env_steps_per_s / base:8.2f}x {alone:>9}"
    )
  if args.json:
    with open(args.json, "w") as f:
      json.dump([dataclasses.asdict(r) for r in rows], f, indent=1)
  return 0


if __name__ == "__main__":
  sys.exit(main())
