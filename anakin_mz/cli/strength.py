"""Train and evaluate each game against its published bar; write a table.

    anakin-mz strength --bars catch --seeds 0 1
    anakin-mz strength --seeds 0 1 --out strength_table.md
    anakin-mz strength --bars nannon --seeds 0 --reevaluate
    anakin-mz strength --report-only --out strength_table.md

The bars (config, minutes, opponent, figure, value to reach) are in the
shipped bar file (anakin_mz/configs/strength.yaml) unless --bar-file. Each
run lands in <runs>/<bar>/seed<S> (TensorBoard, checkpoints, strength.json,
record.jsonl: its run record); a finished run is reused, so the table can
be rebuilt without retraining. The project's strength tables are generated
from the records kept under docs/results/strength_runs/<bar>/seed<S>/ by
`anakin-mz experiment tables` (docs/experiments.md). The library behind it
is `anakin_mz.experiments.strength`.
"""

from __future__ import annotations

import os
import sys

from anakin_mz.runtime import host
from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--bar-file",
    default=None,
    help="YAML bar file (default the shipped anakin_mz/configs/strength.yaml)",
  )
  parser.add_argument("--bars", default=None, help="comma-separated bar names (default: all)")
  parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
  parser.add_argument("--runs", default=os.path.join("runs", "strength"), help="run directories")
  parser.add_argument("--out", default=None, help="write the Markdown table here too")
  parser.add_argument("--reevaluate", action="store_true", help="evaluate finished runs again")
  parser.add_argument(
    "--report-only",
    action="store_true",
    help="train nothing: the table of the finished runs, the others listed as not run",
  )
  parser.add_argument("--no-progress", action="store_true", help="no progress bars")
  parser.add_argument("--devices", default="auto", help="CPU devices: 'auto' or N (see train.py)")
  args = parser.parse_args(argv)
  try:
    devices = host.configure(args.devices)
  except ValueError as e:
    parser.error(str(e))
  if any(s < 0 for s in args.seeds):
    parser.error("--seeds must be >= 0")
  if args.out:
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
      parser.error(f"cannot write --out {args.out!r}: {parent!r} is not a writable directory")
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.runtime import run
  from anakin_mz.experiments import strength

  try:
    bars = strength.select(
      strength.load_bars(args.bar_file), args.bars.split(",") if args.bars else None
    )
    for bar in bars:
      strength.check_config(bar)
    print(f"devices: {devices}", flush=True)
    pairs = [(b, s) for b in bars for s in args.seeds]
    results = [
      strength.run_bar(
        b,
        s,
        args.runs,
        reevaluate=args.reevaluate,
        progress=not args.no_progress,
        train=not args.report_only,
      )
      for b, s in pairs
    ]
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except run.NonFiniteError as e:  # as train.py: the run kept its last good checkpoint
    print(f"error: {e}", file=sys.stderr)
    return 3
  rows = [r for r in results if r is not None]
  missing = [p for p, r in zip(pairs, results) if r is None]
  table = strength.markdown(rows, missing=missing)
  print(table)
  if args.out:
    with open(args.out, "w", encoding="utf-8") as f:
      f.write("# Strength against the published bars\n\n" + table)
    print(f"wrote {args.out}")
  return 0
