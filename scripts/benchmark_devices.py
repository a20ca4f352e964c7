"""How the Anakin step scales over this host's CPU devices, in one run.

    python scripts/benchmark_devices.py --env nannon
    python scripts/benchmark_devices.py --env nannon --devices 1 2 4 8 --repeats 8
    python scripts/benchmark_devices.py --env nannon --devices 2 --rounds 3 --ceiling

Times `Learner.jit_step` (what `train.py` runs: the device-local step on
every device) in a fresh process per setting, the settings taking turns for
`--rounds` rounds: one device pinned to one core (`taskset -c 0`, the
baseline), then N forced host devices on every core for each N of
`--devices` (`train.py --devices N`; N = 1 is one device whose thread pool
spans the cores; N = the core count is what `--devices auto` picks), and
with `--ceiling` one single-device process pinned to each core, all at
once, their rates summed (what the cores give with nothing shared; the
processes do not train together, so it bounds the devices' figure).
Each setting is sized as `train.py` sizes it (`--preset`, default
per-device: each device gets the config's lanes and batch, so N devices do N
times the work of one; `--preset cpu` keeps the sizes global, every setting
doing the same work). It prints the median updates/s and env transitions/s
of each and the ratio of env transitions/s to the baseline, with the load
average (the machine may be shared).
The config is the env's shipped one; `section.key=value` arguments override
it.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys

from anakin_mz.cli import options
from anakin_mz.runtime import scaling

WORKER = r"""
import json, sys
from anakin_mz.runtime import host
host.configure(int(sys.argv[1]))
import jax
from anakin_mz import config as config_lib
from anakin_mz.experiments import profiling
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.runtime import scaling
cfg = config_lib.load_for_env(sys.argv[2], None, sys.argv[5:])[0]
cfg = scaling.preset(cfg, sys.argv[4], jax.device_count())  # as train.py sizes it
dt = profiling.time_step(cfg, repeats=int(sys.argv[3]))
learner = Learner(cfg)
print(json.dumps({"devices": jax.device_count(), "updates_per_s": learner.updates_per_chunk / dt,
                  "env_steps_per_s": learner.transitions_per_chunk / dt}))
"""


def main(argv=None) -> int:
  parser = options.parser(__doc__, None)
  options.add_env_config(parser, config=False)
  parser.add_argument(
    "--devices", type=int, nargs="+", default=[1, 2], help="device counts (all cores)"
  )
  parser.add_argument("--repeats", type=int, default=8, help="timed steps per process")
  parser.add_argument("--rounds", type=int, default=2, help="processes per setting")
  parser.add_argument(
    "--ceiling",
    action="store_true",
    help="also time one single-device process pinned to each core, all at once (summed): "
    "the most the cores give without sharing a process",
  )
  parser.add_argument(
    "--preset",
    default="per-device",
    help=f"sizes, as train.py's --preset: {', '.join(scaling.PRESETS)} (default per-device: "
    "each device the config's lanes and batch; cpu: global, the same work in every setting)",
  )
  args = parser.parse_intermixed_args(argv)
  try:
    scaling.check_preset(args.preset)
  except ValueError as e:
    parser.error(str(e))
  if min(args.devices) < 1 or args.repeats < 1 or args.rounds < 1:
    parser.error("--devices, --repeats and --rounds must be >= 1")
  has_taskset = shutil.which("taskset") is not None
  pin = lambda core: ["taskset", "-c", str(core)] if has_taskset else []
  cores = sorted(os.sched_getaffinity(0))
  # A setting: its name and the commands it runs at once (their rates add).
  settings = [("1 device, 1 core (taskset -c 0)", [(pin(0), 1)])]
  settings += [
    (f"{n} device(s), all cores" + (" (auto)" if n == len(cores) else ""), [([], n)])
    for n in dict.fromkeys(args.devices)
  ]
  if args.ceiling:
    name = f"{len(cores)} processes, 1 pinned core each"
    settings.append((name, [(pin(c), 1) for c in cores]))
  results = {name: [] for name, _ in settings}
  for _ in range(args.rounds):
    for name, commands in settings:
      procs = [
        subprocess.Popen(
          prefix
          + [sys.executable, "-c", WORKER, str(n), args.env, str(args.repeats)]
          + [args.preset]
          + list(args.overrides),
          stdout=subprocess.PIPE,
          stderr=subprocess.PIPE,
          text=True,
        )
        for prefix, n in commands
      ]
      rows = []
      for proc in procs:
        stdout, stderr = proc.communicate()
        if proc.returncode != 0:
          print(f"error: {name} failed: {stderr.strip().splitlines()[-1:]}", file=sys.stderr)
          return 2
        rows.append(json.loads(stdout.strip().splitlines()[-1]))
      summed = {k: sum(r[k] for r in rows) for k in ("updates_per_s", "env_steps_per_s")}
      results[name].append(summed)
      print(f"  {name}: {summed}", file=sys.stderr, flush=True)
  load = os.getloadavg()
  # The ratio is of env transitions/s: sized per device, an update of N
  # devices trains N times the rows, so updates/s would undercount it.
  base = statistics.median(r["env_steps_per_s"] for r in results[settings[0][0]])
  print(
    f"{args.env}, --preset {args.preset}: medians of {args.rounds} processes x "
    f"{args.repeats} steps; "
    f"{os.cpu_count()} cores, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} at the end"
  )
  print(f"{'setting':36} {'updates/s':>10} {'env steps/s':>12} {'vs 1 core':>10}")
  for name, _ in settings:
    ups = statistics.median(r["updates_per_s"] for r in results[name])
    eps = statistics.median(r["env_steps_per_s"] for r in results[name])
    print(f"{name:36} {ups:10.1f} {eps:12.0f} {eps / base:9.2f}x")
  return 0


if __name__ == "__main__":
  sys.exit(main())
