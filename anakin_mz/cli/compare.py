"""Compares agents on one game with the same budget (NDMZ paper, Figures 2 and 3).

    anakin-mz compare --env nannon --agents ndmz --seeds 0,1 \\
        --env-steps 2e6 --every 2e5 --out runs/compare_nannon
    anakin-mz compare --env nannon --config nannon_12_5_6 \\
        --agents ndmz,alphazero,tdlambda --minutes 60 --every 10 --out runs/compare_12_5_6
    anakin-mz compare --env nannon --config paper/nannon_636_ndmz --agents ndmz \\
        --games 30000 --every 300 --score paper --eval-games 1000 --out runs/paper_636
    anakin-mz compare --report-only --out runs/compare_nannon
    anakin-mz compare --merge runs/cmp_s0 runs/cmp_s1 --out runs/cmp  # one report
    anakin-mz compare --from-records docs/results/records/paper.jsonl paper_636 \\
        --env nannon --config paper/nannon_636_ndmz --out runs/p636_report

A comparison is a spec with a schedule (`anakin_mz.experiments.schedule`),
named by --out's last name and run under its parent by the spec driver
(`anakin-mz experiment run` of that spec): a variant per --agents entry
(`agent=NAME` and its overrides), the budget and --every as its schedule.
Each run (agent x seed) is an ordinary run directory `<out>/<agent>_s<seed>`
(TensorBoard, checkpoints; `evaluate --checkpoint` and `plot` work on
it); each scored point a run record in `<out>/records.jsonl`. On the
schedule (`--every`, and at the start) each run is scored: the
game's exact evaluators on the greedy network policy (Nannon: exact win
probability against the optimal and the random player), the greedy search
agent against random in a match, and the paper's dynamics tests. With
`--score paper` each run is scored as the NDMZ paper scores every agent, by
its own search play: matches against each of `--score-opponents` (Wilson
intervals), with the exact scores of `--exact` policies beside them. With
`--games N --every 300` the budget is self-play games and the schedule the
paper's rounds of 300 games. The results go to `<out>/compare.md` (tables at
equal env steps and at equal wall-clock, and by round), `<out>/figure2.png`
and `<out>/figure3_<run>.png`.

Run the same command again to resume (each run continues from its last
checkpoint). `--score-from G` scores first at G (in the budget's unit), not
untrained: a repeat of a run whose early points are known trains to G
unscored. A run stopped between points (SIGTERM at a device's deadline)
is scored where it stopped, with no more training, by the same command
with `--score-now` (its games are counted exactly, beside the checkpoint);
the same command without it then goes on to the next point.
`--from-records FILE EXPERIMENT` draws the report again from the scored
points a comparison recorded (`<out>/records.jsonl`; before compare was a
spec with a schedule, one in each run directory; or a project records
file), when its run directories are gone.

An agent entry may carry overrides of its own:
`--agents ndmz,ndmz:search.num_simulations=32`. `--agents` passes
`agent=<name>` to the config (where the config has an `agent` key; without
one only `ndmz` is valid). Library: `anakin_mz.experiments.compare`.
"""

from __future__ import annotations

import os
import sys

import envs
from anakin_mz import agents  # noqa: F401 (registers every agent)
from anakin_mz import config as config_lib
from anakin_mz.runtime import host
from anakin_mz.core import registry
from anakin_mz.cli import options


# The report-only modes, and the options only a training or scoring run reads:
# one given beside a report mode would be silently ignored, so it is refused.
_REPORT_MODES = (
  ("report_only", "--report-only"),
  ("merge", "--merge"),
  ("from_records", "--from-records"),
)
_RUN_OPTIONS = (
  "agents",
  "seeds",
  "env_steps",
  "minutes",
  "games",
  "every",
  "score_from",
  "score",
  "score_opponents",
  "exact",
  "score_now",
  "eval_games",
)


def _refuse_unused(parser, args) -> None:
  """Exits 2 (`parser.error`) when a report mode (one at most: they are a
  mutually exclusive group) comes with an option it does not read:
  `--from-records` reads --env, --config and the overrides (the game's
  reference scores), `--report-only` and `--merge` the settings saved in
  --out."""
  modes = [flag for dest, flag in _REPORT_MODES if getattr(args, dest)]
  if not modes:
    return
  unused = list(_RUN_OPTIONS) if args.from_records else [*_RUN_OPTIONS, "env", "config"]
  given = ["--" + d.replace("_", "-") for d in unused if getattr(args, d) != parser.get_default(d)]
  if args.overrides and not args.from_records:
    given.append(f"the overrides {' '.join(args.overrides)}")
  if given:
    reads = "--env, --config and overrides" if args.from_records else "the settings saved in --out"
    parser.error(
      f"{modes[0]} only draws the report (it reads {reads}); it does not use "
      f"{', '.join(given)}, which train or score runs: drop them, or run without {modes[0]}"
    )


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--env", type=options.env_name, help=f"one of {', '.join(envs.registered())}")
  parser.add_argument("--config", default=None, help=options.CONFIG_HELP)
  parser.add_argument("overrides", nargs="*", help="section.key=value overrides for every run")
  parser.add_argument(
    "--agents",
    default="ndmz",
    help=f"comma-separated, of {', '.join(registry.names())}",
  )
  parser.add_argument("--seeds", default="0", help="comma-separated seeds, one run each")
  budget = parser.add_mutually_exclusive_group()
  budget.add_argument("--env-steps", type=options.real, help="budget: env steps per run")
  budget.add_argument("--minutes", type=options.real, help="budget: training minutes per run")
  budget.add_argument("--games", type=options.real, help="budget: self-play games per run")
  parser.add_argument(
    "--every", type=options.real, help="score every this many env steps / minutes / games"
  )
  parser.add_argument(
    "--score-from",
    type=options.real,
    default=0.0,
    help="the first scored point, in the budget's unit (default 0: the untrained agent); "
    "the run trains to it unscored",
  )
  parser.add_argument(
    "--score",
    choices=("run", "paper"),
    default="run",
    help="run: the training loop's evaluation; paper: the agent's search play (default run)",
  )
  parser.add_argument(
    "--score-opponents",
    default="optimal,random",
    help="--score paper: the bots its search plays, comma-separated (default optimal,random)",
  )
  parser.add_argument(
    "--exact",
    default="greedy,search,value",
    help="--score paper: the policies the game's exact evaluators score, comma-separated, of "
    "greedy, search, value (empty: none; default all three)",
  )
  parser.add_argument(
    "--score-now",
    action="store_true",
    help="train nothing: score each run's latest checkpoint where it is past the run's last "
    "point (a run a signal stopped between points), at the games saved with it",
  )
  parser.add_argument("--eval-games", type=int, default=500, help="match games per score (even)")
  parser.add_argument("--out", required=True, help="the comparison's directory")
  report = parser.add_mutually_exclusive_group()
  report.add_argument(
    "--report-only", action="store_true", help="only redraw the table and figures from --out"
  )
  report.add_argument(
    "--merge",
    nargs="+",
    metavar="DIR",
    help="report over the runs of these comparisons in --out (same settings; a "
    "TD(lambda)-only one: the same game)",
  )
  report.add_argument(
    "--from-records",
    nargs=2,
    metavar=("FILE", "EXPERIMENT"),
    help="draw the report in --out from the scored points of EXPERIMENT in a records file "
    "(with --env and --config for the game's references), not from run directories",
  )
  parser.add_argument("--devices", default="auto", help="CPU devices: 'auto' or N (as train.py)")
  args = parser.parse_intermixed_args(argv)
  _refuse_unused(parser, args)
  try:  # before anything starts JAX
    devices = host.configure(args.devices)
  except ValueError as e:
    parser.error(str(e))

  from anakin_mz.experiments import compare

  options.persistent_cache()

  if args.from_records:
    if not args.env:
      parser.error("--from-records needs --env (and --config) for the game's reference scores")
    try:
      from anakin_mz.experiments import records as records_lib

      path, experiment = args.from_records
      rows = compare.rows_from_records(records_lib.read(path), experiment)
      base, _, _ = config_lib.load_for_env(args.env, args.config, args.overrides)
      unit = "games" if any(r["games"] > 0 for rs in rows.values() for r in rs) else "env_steps"
      last = max(float(r[unit]) for rs in rows.values() for r in rs)
      os.makedirs(args.out, exist_ok=True)
      paths = compare.write_report(
        args.out,
        rows,
        compare.Budget(unit, max(last, 1.0), max(last, 1.0)),
        compare.references(base),
        f"{experiment}: from {path}",
      )
    except (ValueError, OSError) as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    print("\n".join(paths))
    return 0

  if args.report_only or args.merge:
    try:
      if args.merge:
        compare.merge(args.out, args.merge)
      spec = compare.read_spec(args.out)
      rows = compare.load_rows(args.out)
      config = config_lib.load(spec["config"], spec["overrides"])
      paths = compare.write_report(
        args.out,
        rows,
        compare.Budget(**spec["budget"]),
        compare.references(config),
        spec.get("title", ""),
      )
    except ValueError as e:
      print(f"error: {e}", file=sys.stderr)
      return 2
    print("\n".join(paths))
    return 0

  if not args.env:
    parser.error("--env is required (unless --report-only)")
  given = [b for b in (args.env_steps, args.minutes, args.games) if b is not None]
  if len(given) != 1:
    parser.error("give one budget: --env-steps N, --minutes M or --games G")
  if args.every is None:
    parser.error("--every is required: score every this many env steps (or minutes, or games)")
  try:
    seeds = [int(s) for s in args.seeds.split(",")]
  except ValueError:
    parser.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
  try:
    unit = (
      "env_steps"
      if args.env_steps is not None
      else ("minutes" if args.minutes is not None else "games")
    )
    spec = _spec(args, seeds, compare.Budget(unit, given[0], args.every, args.score_from))
    base, _, _ = config_lib.load_for_env(args.env, args.config, args.overrides)
  except ValueError as e:
    parser.error(str(e))

  from anakin_mz.experiments import spec as spec_lib

  print(f"devices: {devices}", flush=True)
  title = f"{base.env} {dict(base.env_params)}: {args.agents}, seeds {args.seeds}"
  out = os.path.normpath(args.out)
  try:  # the one driver: `experiment run` of the spec
    spec_lib.run(spec, os.path.dirname(out), progress=False, score_now=args.score_now, title=title)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  report = os.path.join(args.out, "compare.md")
  if os.path.exists(report):  # none yet where a signal stopped a first point's training
    with open(report, encoding="utf-8") as f:
      print(f.read())
  return 0


def _spec(args, seeds, budget):
  """The spec with a schedule that this comparison is: named by --out's last
  name (run under its parent), a variant per --agents entry (`agent=NAME`,
  then its overrides; named by compare's label), the budget and scoring as
  the schedule, --eval-games as its evaluation's games.

  Raises:
    ValueError: a bad agent entry, seed list or scoring.
  """
  from anakin_mz.experiments import compare, schedule, spec as spec_lib

  if args.score == "paper":  # as the schedule's parser, before anything runs
    compare.PaperScoring(
      opponents=tuple(o for o in args.score_opponents.split(",") if o),
      exact=tuple(p for p in args.exact.split(",") if p),
    )
  variants = {}
  for r in compare.parse_runs(args.agents, seeds):
    variants.setdefault(r.label[: -len(f"_s{r.seed}")], (f"agent={r.agent}", *r.overrides))
  spec = spec_lib.Spec(
    name=os.path.basename(os.path.normpath(args.out)),
    env=args.env,
    config=args.config,
    overrides=tuple(args.overrides),
    variants=tuple(spec_lib.Variant(n, o, tuple(seeds)) for n, o in variants.items()),
    evaluation={"games": args.eval_games},
    schedule=schedule.Schedule(
      budget,
      args.score,
      tuple(o for o in args.score_opponents.split(",") if o),
      tuple(p for p in args.exact.split(",") if p),
    ),
  )
  schedule.check_spec(spec)
  return spec
