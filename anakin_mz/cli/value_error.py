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

With --moves it compares the moves instead (`anakin_mz.experiments.
move_values`), on --samples decisions of the sources positions and fresh:
each player's (greedy, search, model_1ply, model_chance, value) agreement
with the exact best move, the win probability it gives up, and where it
values the moves, its error on the greedy head's move and on the others:

    anakin-mz value-error --checkpoint runs/n/checkpoints --moves --samples 4096
"""

from __future__ import annotations

import json
import shlex
import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.experiments import move_values, value_error

  parser = options.parser(__doc__, prog)
  parser.add_argument("--checkpoint", required=True, help=options.CHECKPOINT_HELP)
  parser.add_argument("--step", type=int, default=None, help="saved step (default latest)")
  parser.add_argument(
    "--sources",
    default=None,
    help=f"comma-separated, of {', '.join(value_error.SOURCES)} (default all; "
    f"with --moves, of {', '.join(move_values.SOURCES)})",
  )
  parser.add_argument(
    "--samples", type=options.integer, default=None, help="default 100000 (--moves: 4096)"
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument(
    "--moves",
    action="store_true",
    help="compare every player's moves and move values with the exact ones",
  )
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
  module = move_values if args.moves else value_error
  samples = args.samples if args.samples is not None else (4096 if args.moves else 100_000)
  if samples < 2:
    parser.error(f"--samples must be >= 2, got {samples}")
  sources = module.SOURCES if args.sources is None else [s for s in args.sources.split(",") if s]
  try:
    if args.moves:
      result = move_values.move_errors(
        args.checkpoint, step=args.step, samples=samples, seed=args.seed, sources=sources
      )
    else:
      result = value_error.value_errors(
        args.checkpoint, step=args.step, samples=samples, seed=args.seed, sources=sources
      )
  except ValueError as e:  # CheckpointError is a ValueError
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.moves:
    _print_moves(result, move_values)
  else:
    _print_values(result, value_error)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1)
    print(f"wrote {args.json}")
  if args.records:
    from anakin_mz.experiments import records

    command = "anakin-mz value-error " + " ".join(
      shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    record = module.to_record(
      result, experiment=args.experiment, variant=args.variant, command=command
    )
    records.append(args.records, record)
    print(f"recorded in {args.records}")
  return 0


def _print_values(result, value_error) -> None:
  print(f"value head vs exact, step {result['step']}, nannon {result['env_params']}")
  print(f"  {'source':10} {'count':>8} {'pearson':>8} {'mae':>7} {'rmse':>7} {'bias':>7}")
  for source in value_error.SOURCES:
    if source in result:
      r = result[source]
      print(
        f"  {source:10} {r['count']:8d} {r['pearson']:8.4f} {r['mae']:7.4f} "
        f"{r['rmse']:7.4f} {r['bias']:+7.4f}"
      )


def _print_moves(result, move_values) -> None:
  print(f"moves vs exact, step {result['step']}, nannon {result['env_params']}")
  head = ("agree", "regret", "top", "mae_top", "mae_oth", "bias_top", "bias_oth")
  for source in move_values.SOURCES:
    if source not in result:
      continue
    first = next(iter(result[source].values()))
    print(f"  {source} ({first['decisions']} decisions with >= 2 legal moves)")
    print(f"    {'player':13}" + "".join(f"{h:>9}" for h in head))
    for player, r in result[source].items():
      cells = (r["agreement"], r["regret"], r["top_share"], r["mae_top"], r["mae_other"])
      signed = (r["bias_top"], r["bias_other"])
      print(
        f"    {player:13}"
        + "".join(f"{c:9.4f}" for c in cells)
        + "".join(f"{c:+9.4f}" for c in signed)
      )
