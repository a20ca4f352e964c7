"""Compares a Nannon checkpoint's value head with the solver's exact values.

    anakin-mz value-error --checkpoint runs/nannon_12_5_6/checkpoints
    anakin-mz value-error --checkpoint nannon --sources positions,fresh --samples 20000
    anakin-mz value-error --checkpoint runs/n/checkpoints --json value_error.json

On up to --samples decisions from each source (`anakin_mz.experiments.
value_error`): `positions`, a uniform sample of all the game's decisions;
`replay`, the decision steps of the replay buffer saved with the checkpoint
(a training checkpoint, not an exported model); `fresh`, new self-play
games of the checkpoint. For each: the count, Pearson's r, the mean
absolute and root mean squared error and the bias, in value units
(2 w - 1, w the mover's win probability under optimal play). The first run
on 12-5-6 solves the game (about 5 minutes, then cached).
"""

from __future__ import annotations

import json
import shlex
import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.experiments import value_error

  parser = options.parser(__doc__, prog)
  parser.add_argument("--checkpoint", required=True, help=options.CHECKPOINT_HELP)
  parser.add_argument("--step", type=int, default=None, help="saved step (default latest)")
  parser.add_argument(
    "--sources",
    default=",".join(value_error.SOURCES),
    help=f"comma-separated, of {', '.join(value_error.SOURCES)} (default all)",
  )
  parser.add_argument("--samples", type=options.integer, default=100_000)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default=None, help="also write the result here")
  parser.add_argument(
    "--records",
    default=None,
    help="also append a run record to this file (with --experiment and --variant)",
  )
  parser.add_argument("--experiment", default="value_error", help="the record's experiment")
  parser.add_argument("--variant", default=None, help="the record's variant (e.g. the model)")
  args = parser.parse_args(argv)
  if (args.records is None) != (args.variant is None):
    parser.error("--records and --variant go together")
  if args.samples < 2:
    parser.error(f"--samples must be >= 2, got {args.samples}")
  try:
    result = value_error.value_errors(
      args.checkpoint,
      step=args.step,
      samples=args.samples,
      seed=args.seed,
      sources=[s for s in args.sources.split(",") if s],
    )
  except ValueError as e:  # CheckpointError is a ValueError
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"value head vs exact, step {result['step']}, nannon {result['env_params']}")
  print(f"  {'source':10} {'count':>8} {'pearson':>8} {'mae':>7} {'rmse':>7} {'bias':>7}")
  for source in value_error.SOURCES:
    if source in result:
      r = result[source]
      print(
        f"  {source:10} {r['count']:8d} {r['pearson']:8.4f} {r['mae']:7.4f} "
        f"{r['rmse']:7.4f} {r['bias']:+7.4f}"
      )
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
    print(f"wrote {args.json}")
  if args.records:
    from anakin_mz.experiments import records

    command = "anakin-mz value-error " + " ".join(
      shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    record = value_error.to_record(
      result, experiment=args.experiment, variant=args.variant, command=command
    )
    records.append(args.records, record)
    print(f"recorded in {args.records}")
  return 0
