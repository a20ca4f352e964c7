"""Run an experiment spec into run records; rebuild the results tables from records.

    anakin-mz experiment run docs/results/experiments/carchess_sweep.yaml
    anakin-mz experiment run SPEC --variants base,td10 --seeds 0 1 --runs runs
    anakin-mz experiment run SPEC --dry-run        # the commands, nothing run
    anakin-mz experiment run docs/results/experiments/strength_nannon.yaml --report-only
    anakin-mz experiment tables                    # docs/results/tables/*.md from the records
    anakin-mz experiment tables --check            # exit 1 where a table file differs
    anakin-mz experiment curve RUN --experiment minatar_10m --variant "Breakout MuZero" \
        --seed 0 --at 1e6 1e7 --records docs/results/records/minatar.jsonl --command "..."
    anakin-mz experiment import runs/paper/p636_az_s0/records.jsonl \
        --into docs/results/records/paper.jsonl --experiment paper_636 \
        --variant alphazero --round-games 300

`run` trains and evaluates each (variant, seed) of the spec into
<runs>/<name>/<variant>_s<seed> and appends one run record per run to the
spec's records file (default <runs>/<name>/records.jsonl); a run with a
record is skipped, so the same command resumes. Two processes on disjoint
--variants (each under its own `taskset -c CORE`) may share a records file.
A variant's seeds still to train run as one program (`anakin-mz train
--seeds`) where the budget is updates alone and the memory fits, else one
after another; one line says which and why (`--seeds-together yes|no`
forces it; yes shares a minutes budget among the seeds). A spec with a
`target` (a bar) ends with its report: each run's figure against the bar,
from the records (`--report-only`: the report alone, nothing run, the runs
without a record listed as not run; `--out FILE` writes it there too);
`--reevaluate` evaluates recorded runs again and replaces their records.
A spec with a `schedule` trains its runs in rounds, scoring each between
them (a record per point, `<runs>/<name>/compare.md` the report after each
round; `--score-now` scores a run a signal stopped between points, training
nothing); `anakin-mz compare` builds such a spec from its options.

`tables` rebuilds every table of docs/results/tables.yaml from the run
records in git into docs/results/tables/<name>.md (run it from the
repository root). `curve` appends the record of one TensorBoard run's
learning curve (the self-play return, or `--tag`) read at `--at` env steps
(or minutes, `--axis wall`), for runs that are judged by that curve.
`import` appends the records a tool wrote beside its run directories (e.g.
`compare`'s `<out>/records.jsonl`) to a project records file, under
the table's experiment and variant; a record already there is skipped, so
it can be run again.
Libraries: `anakin_mz.experiments.spec`, `.schedule`, `.schedule_run`,
`.records`, `.tables`, `.curves`; docs/experiments.md describes the pipeline.
"""

from __future__ import annotations

import os
import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  sub = parser.add_subparsers(dest="command", metavar="{run,tables,curve,import}")
  run_p = sub.add_parser("run", help="train and evaluate a spec's runs into records")
  run_p.add_argument("spec", help="the experiment spec (YAML)")
  run_p.add_argument("--runs", default="runs", help="run directories go under RUNS/<name>/")
  run_p.add_argument("--records", default=None, help="records file (default: the spec's)")
  run_p.add_argument("--variants", default=None, help="comma-separated (default: all)")
  run_p.add_argument("--seeds", type=int, nargs="+", default=None, help="default: the spec's")
  run_p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
  run_p.add_argument("--no-progress", action="store_true", help="no progress bars")
  run_p.add_argument("--devices", default="auto", help="CPU devices: 'auto' or N (as train)")
  run_p.add_argument(
    "--seeds-together",
    choices=("auto", "yes", "no"),
    default="auto",
    help="train a variant's seeds as one program: auto (default: where the budget has no "
    "minutes and the memory fits), yes (wherever the agent can), no (one after another)",
  )
  run_p.add_argument(
    "--reevaluate", action="store_true", help="evaluate recorded runs again, replacing records"
  )
  run_p.add_argument(
    "--report-only",
    action="store_true",
    help="run nothing: the target's report of the recorded runs, the others listed as not run",
  )
  run_p.add_argument("--out", default=None, help="write the target's report here too (Markdown)")
  run_p.add_argument(
    "--score-now",
    action="store_true",
    help="a spec with a schedule: train nothing, score each run's checkpoint past its last "
    "point where it is (a run a signal stopped between points)",
  )
  tab_p = sub.add_parser("tables", help="rebuild the results tables from the run records")
  tab_p.add_argument(
    "--defs", default=os.path.join("docs", "results", "tables.yaml"), help="table definitions"
  )
  tab_p.add_argument("--out", default=None, help="default: tables/ beside the definitions")
  tab_p.add_argument(
    "--check", action="store_true", help="write nothing; exit 1 where a file would change"
  )
  cur_p = sub.add_parser("curve", help="record a run's learning curve read at given points")
  cur_p.add_argument("run", help="the run's TensorBoard directory (its --logdir)")
  cur_p.add_argument("--experiment", required=True, help="the record's experiment")
  cur_p.add_argument("--variant", required=True, help="the record's variant (a table's row)")
  cur_p.add_argument("--seed", type=int, default=None, help="the run's seed")
  cur_p.add_argument(
    "--at", type=options.real, nargs="+", required=True, help="points (1e7, 300_000)"
  )
  cur_p.add_argument("--axis", default="env_steps", help="env_steps (default) or wall (minutes)")
  cur_p.add_argument("--tag", default=None, help="default: the self-play return")
  cur_p.add_argument("--window", type=float, default=0.1, help="mean over the last fraction")
  cur_p.add_argument("--command", dest="run_command", default=None, help="how the run ran")
  cur_p.add_argument("--note", default="", help="the record's note")
  cur_p.add_argument(
    "--commit", default=None, help="the code the run ran (default: this checkout's)"
  )
  cur_p.add_argument("--device", default=None, help="where it ran (default: this process's)")
  cur_p.add_argument("--records", required=True, help="records file to append to")
  imp_p = sub.add_parser("import", help="append run directories' records to a records file")
  imp_p.add_argument("sources", nargs="+", help="records files written by a run (records.jsonl)")
  imp_p.add_argument("--into", required=True, help="the project records file to append to")
  imp_p.add_argument("--experiment", required=True, help="the experiment they are recorded under")
  imp_p.add_argument("--variant", default=None, help="their variant (default: as written)")
  imp_p.add_argument("--device", default=None, help="where they ran (default: as written)")
  imp_p.add_argument("--note", default=None, help="how they ran (default: as written)")
  imp_p.add_argument(
    "--round-games",
    type=options.real,
    default=None,
    help="record the round each reached: its games played over this, to the nearest",
  )
  args = parser.parse_args(argv)
  if args.command is None:
    parser.error("give a command: run SPEC, tables, curve RUN, or import RECORDS")
  if args.command == "tables":
    return _tables(args)
  if args.command == "curve":
    return _curve(args)
  if args.command == "import":
    return _import(args)
  return _run(parser, args)


def _import(args) -> int:
  from anakin_mz.experiments import records as records_lib

  try:
    there = (
      {records_lib.to_line(r) for r in records_lib.read(args.into)}
      if os.path.exists(args.into)
      else set()
    )
    new = [
      records_lib.imported(
        r,
        args.experiment,
        variant=args.variant,
        device=args.device,
        note=args.note,
        round_games=args.round_games,
      )
      for path in args.sources
      for r in records_lib.read(path)
    ]
  except ValueError as e:  # RecordError too
    print(f"error: {e}", file=sys.stderr)
    return 2
  added = 0
  for r in new:
    line = records_lib.to_line(r)
    if line not in there:
      records_lib.append(args.into, r)
      there.add(line)
      added += 1
  print(f"{args.into}: {added} record(s) added, {len(new) - added} already there")
  return 0


def _tables(args) -> int:
  from anakin_mz.experiments import tables

  out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.defs)), "tables")
  try:
    diffs = tables.sync(args.defs, out, check=args.check)
  except ValueError as e:  # TableError, RecordError
    print(f"error: {e}", file=sys.stderr)
    return 2
  for d in diffs:
    print(("would be " if args.check else "") + d)
  if args.check and diffs:
    print(
      "error: the tables differ from their records; run `anakin-mz experiment tables` "
      "(and edit records or docs/results/tables.yaml, never the generated files)",
      file=sys.stderr,
    )
    return 1
  if not diffs:
    print(f"{out}: every table is up to date")
  return 0


def _curve(args) -> int:
  from anakin_mz.experiments import curves
  from anakin_mz.experiments import records as records_lib
  from anakin_mz.runtime import summary

  try:
    record = curves.curve_record(
      args.run,
      experiment=args.experiment,
      variant=args.variant,
      seed=args.seed,
      command=args.run_command,
      at=args.at,
      tag=args.tag or summary.RETURN,
      axis=args.axis,
      window=args.window,
      note=args.note,
      commit=args.commit or records_lib.HERE,
      device=args.device or records_lib.HERE,
    )
    records_lib.append(args.records, record)
  except ValueError as e:  # RecordError too
    print(f"error: {e}", file=sys.stderr)
    return 2
  cells = ", ".join(f"{k} {f.value:.3f}" for k, f in record.figures.items())
  print(f"{args.records}: {record.variant} seed {record.seed}: {cells}")
  return 0


def _run(parser, args) -> int:
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.runtime import host

  try:
    devices = host.configure(args.devices)
  except ValueError as e:
    parser.error(str(e))
  if args.seeds is not None and any(s < 0 for s in args.seeds):
    parser.error("--seeds must be >= 0")
  if args.out:
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
      parser.error(f"cannot write --out {args.out!r}: {parent!r} is not a writable directory")
  from anakin_mz.experiments import spec as spec_lib
  from anakin_mz.runtime import run

  try:
    spec = spec_lib.load(args.spec)
    variants = args.variants.split(",") if args.variants else None
    pairs = spec_lib.plan(spec, variants, args.seeds)
    if (args.report_only or args.out) and spec.target is None:
      raise ValueError(
        f"spec {args.spec!r} has no target: --report-only and --out report against a "
        "target (its other tables come from `anakin-mz experiment tables`)"
      )
    spec_lib.check(spec)
    if args.score_now and spec.schedule is None:
      raise ValueError(f"spec {args.spec!r} has no schedule: --score-now scores its points")
    if args.report_only:
      return _report(spec, args, pairs)
    records = args.records or spec_lib.records_path(spec, args.runs)
    if args.dry_run and spec.schedule is not None:
      from anakin_mz.experiments import schedule_run

      print("\n".join(schedule_run.describe(spec, args.runs, records, pairs)))
      return 0
    if args.dry_run:
      for v, s in pairs:
        logdir = spec_lib.run_dir(spec, args.runs, v, s)
        checkpoint = spec.checkpoint or os.path.join(logdir, "checkpoints")
        if spec.checkpoint is None:
          print(spec_lib.train_command(spec, v, s, logdir))
        eval_json = os.path.join(logdir, "eval.json")
        print(spec_lib.evaluate_command(spec, v, s, checkpoint, eval_json))
      print(f"records: {records}")
      if spec.checkpoint is None and any(len(args.seeds or v.seeds) > 1 for v in spec.variants):
        print(
          f"(--seeds-together {args.seeds_together}: the run says for each variant whether "
          "its seeds train as one program, `anakin-mz train --seeds`)"
        )
      return 0
    print(f"devices: {devices}", flush=True)
    scheduled = {}
    if spec.schedule is not None:
      options.persistent_cache()
      scheduled = {"score_now": args.score_now}
    new = spec_lib.run(
      spec,
      args.runs,
      records=args.records,
      variants=variants,
      seeds=args.seeds,
      progress=not args.no_progress,
      together=args.seeds_together,
      reevaluate=args.reevaluate,
      **scheduled,
    )
    print(f"{len(new)} new record(s) of {len(pairs)} run(s)")
    return _report(spec, args, pairs) if spec.target is not None else 0
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except run.NonFiniteError as e:  # as train: the run kept its last good checkpoint
    print(f"error: {e}", file=sys.stderr)
    return 3


def _report(spec, args, pairs) -> int:
  """Prints (and writes to --out) the report of `pairs` against the spec's
  target, from its records."""
  from anakin_mz.experiments import spec as spec_lib
  from anakin_mz.experiments import target

  sources = {v.name: v.note or spec.target.source for v in spec.variants}
  table = target.report(
    args.records or spec_lib.records_path(spec, args.runs),
    spec.name,
    [(v.name, s) for v, s in pairs],
    str(spec.evaluation["measure"]),
    spec.target,
    model=spec.evaluation.get("model"),
    sources=sources,
  )
  print(table)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.write(f"# {spec.name}: against the target\n\n{table}")
    print(f"wrote {args.out}")
  return 0
