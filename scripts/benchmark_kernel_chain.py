"""Where one Anakin step's chain of kernels is: `sequential_ops` by phase.

    taskset -c 0 python scripts/benchmark_kernel_chain.py --env nannon --lanes 64
    taskset -c 0 python scripts/benchmark_kernel_chain.py --env nannon --top 40 --rolled-threefry

Compiles the env's config resized to `--lanes` (`runtime.scaling.scale`, as
`benchmark_scale.py` does), runs `--steps` steps to measure the rollout's
iterations, and counts the compiled program's kernels in sequence as
`experiments.profiling.sequential_ops` does (loop bodies times trips; the
rollout's loop times its measured iterations). Each counted instruction is
put in a phase by where it sits (the rollout's loop, the search's
simulation loop inside it, the updates' scan, or outside them) and by the
source file XLA's metadata names for it: self-play env steps, search,
replay write, sample (targets, draws), loss/grad, optimizer, step (other).
`--top N` also prints the N source lines with the most kernels.
`--rolled-threefry` keeps JAX's CPU loop for threefry (the code before
`runtime/threefry.py`), for a before/after pair.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys


def _frames(hlo: str):
  """stack_frame_id -> (file, function, line), from the HLO text's tables."""
  files, funcs, locs, frames, section = {}, {}, {}, {}, None
  for raw in hlo.splitlines():
    line = raw.strip()
    if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
      section = line
      continue
    m = re.match(r"^(\d+) (.*)$", line)
    if section is None or not m:
      continue
    i, v = int(m.group(1)), m.group(2)
    if section == "FileNames":
      files[i] = v.strip('"')
    elif section == "FunctionNames":
      funcs[i] = v.strip('"')
    else:
      d = {k: int(x) for k, x in re.findall(r"(\w+)=(\d+)", v)}
      if section == "FileLocations":
        f = files[d["file_name_id"]].split("site-packages/")[-1]
        locs[i] = (
          re.sub(r"^.*?/(anakin_mz|envs)/", r"\1/", f),
          funcs[d["function_name_id"]],
          d["line"],
        )
      else:
        frames[i] = locs[d["file_location_id"]]
  return frames


def _phase(where: str, file: str, function: str) -> str:
  if where == "search":
    return "search"
  if where == "rollout":
    searchy = file.startswith(("anakin_mz/core/search", "mctx")) or "lane_search" in function
    if searchy or file in ("anakin_mz/core/act.py", "anakin_mz/core/networks.py"):
      return "search"
    return "self-play env steps"
  if where == "updates":
    if file.startswith("anakin_mz/core/replay") or file == "anakin_mz/core/reanalyse.py":
      return "sample"
    if file.startswith("optax") and not file.startswith("optax/losses"):
      return "optimizer"
    return "loss/grad"
  if file == "anakin_mz/core/replay/buffer.py":
    return "replay write"
  if file.startswith("anakin_mz/core/replay"):
    return "sample"
  if file.startswith("optax") or file == "anakin_mz/runtime/guard.py":
    return "optimizer"
  return "step (other)"


def by_phase(hlo: str, outer_trips: int):
  """(kernels by phase, kernels by (phase, file, function, line)), summing
  to `sequential_ops(hlo, outer_trips).total` (the rollout is the entry's
  loop without a trip count; a rolled threefry loop counts in the phase of
  the draw that made it; the updates' draws count in `sample`)."""
  from anakin_mz.experiments.profiling import _FREE_OPS, _INSTRUCTION, _computations

  comps, entry = _computations(hlo)
  frames = _frames(hlo)
  phases, lines = collections.Counter(), collections.Counter()

  def source(line):
    m = re.search(r"stack_frame_id=(\d+)", line)
    return frames.get(int(m.group(1)), ("?", "?", 0)) if m else ("?", "?", 0)

  def walk(name, mult, where, fixed=None):
    for line in comps.get(name, []):
      m = _INSTRUCTION.match(line)
      if not m or m.group(1) in _FREE_OPS:
        continue
      op, rest = m.group(1), m.group(2)
      if op == "while":
        trips = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', rest)
        trips = int(trips.group(1)) if trips else None
        op_name = re.search(r'op_name="([^"]*)"', line)
        inner, inner_fixed = where, fixed
        if trips == 5 and op_name and re.search(r"threefry|uniform|randint|gumbel", op_name[1]):
          f, fn, _ = source(line)
          inner_fixed = fixed or ("sample" if where == "updates" else _phase(where, f, fn))
        elif where == "top":
          inner = "updates" if trips else "rollout"
          trips = trips or outer_trips
        elif where == "rollout" and trips:
          inner = "search"
        for part in ("body", "condition"):
          walk(
            re.search(part + r"=%([^\s,]+)", rest).group(1), mult * (trips or 1), inner, inner_fixed
          )
      elif op == "call":
        walk(re.search(r"to_apply=%([^\s,]+)", rest).group(1), mult, where, fixed)
      elif op == "conditional":
        raise NotImplementedError("conditionals: count them as profiling.sequential_ops does")
      else:
        f, fn, ln = source(line)
        p = fixed or _phase(where, f, fn)
        phases[p] += mult
        lines[(p, f, fn, ln)] += mult

  walk(entry, 1, "top")
  return phases, lines


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
    description=__doc__.split("\n")[0],
    formatter_class=argparse.RawDescriptionHelpFormatter,
    epilog=__doc__,
  )
  parser.add_argument("--env", required=True, help="a registered env with a config")
  parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
  parser.add_argument("--lanes", type=int, default=64, help="lanes (global; default 64)")
  parser.add_argument("--steps", type=int, default=2, help="steps run to measure the iterations")
  parser.add_argument("--top", type=int, default=0, help="also print the N heaviest source lines")
  parser.add_argument("--rolled-threefry", action="store_true", help="keep JAX's CPU threefry loop")
  args = parser.parse_intermixed_args(argv)

  import numpy as np

  from anakin_mz import config as config_lib
  from anakin_mz.experiments import profiling
  from anakin_mz.runtime import scaling, threefry
  from anakin_mz.agents.replay_learner import Learner

  if args.rolled_threefry:
    threefry.unroll_on_cpu = lambda: None
  cfg, _, _ = config_lib.load_for_env(args.env, None, list(args.overrides))
  cfg = scaling.scale(cfg, args.lanes)
  learner = Learner(cfg)
  state = learner.init_sharded(cfg.seed)
  step = learner.jit_step.lower(state).compile()
  searches = []
  for _ in range(args.steps):
    state, metrics = step(state)
    searches.append(float(np.sum(metrics.search.searches)))
  trips = round(float(np.median(searches)) / args.lanes)
  hlo = step.as_text()
  total = profiling.sequential_ops(hlo, outer_trips=trips).total
  phases, lines = by_phase(hlo, trips)
  print(f"{args.env}, {args.lanes} lanes, {trips} rollout iterations: sequential_ops {total}")
  for name, n in phases.most_common():
    print(f"{n:8d}  {100 * n / total:5.1f} %  {name}")
  for (p, f, fn, ln), n in lines.most_common(args.top):
    print(f"{n:8d}  {p:<20} {f}:{ln} {fn}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
