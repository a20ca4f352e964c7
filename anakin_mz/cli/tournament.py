"""Round-robin tournament among saved agents and bots, with Elo ratings.

    anakin-mz tournament --all-steps runs/nannon/checkpoints --bots random,optimal
    anakin-mz tournament --checkpoint runs/a/checkpoints --step 2000 \
        --checkpoint runs/b/checkpoints --bots random --games 200 --png elo.png

Every pair of players meets in `--games` games (each takes each seat in half
of them). A player is named by its run's directory (`runs/a` for
`runs/a/checkpoints`), its model file's stem or its shipped name, then
`@STEP`; two players of one name are named by their paths instead, and the
same checkpoint given twice is an error. Checkpoints play the greedy search
with their own search config (`--simulations` overrides it for all).
Ratings are maximum-likelihood Elo with 95% intervals, anchored at
`--anchor` (default: the random bot = 0 if it plays, else mean 0). The PNG
(needs the `plot` extra) plots each run's Elo against its training step,
with the bots as horizontal lines. Two-player zero-sum games only. The
library behind it is `anakin_mz.eval.tournament`.
"""

from __future__ import annotations

import json
import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--checkpoint",
    action="append",
    default=[],
    help=f"{options.CHECKPOINT_HELP} (repeatable); its latest step unless --step",
  )
  parser.add_argument(
    "--step", type=int, default=None, help="the saved step each --checkpoint plays (default latest)"
  )
  parser.add_argument(
    "--all-steps",
    action="append",
    default=[],
    help="a checkpoint directory or a run's logdir: every saved step of it plays (repeatable)",
  )
  parser.add_argument(
    "--bots",
    default="random",
    help="comma-separated bots of the game, e.g. random,optimal,mcts:64 ('' for none)",
  )
  parser.add_argument("--games", type=int, default=100, help="games per pair (even)")
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--anchor", default=None, help="player rated 0 (default random)")
  parser.add_argument("--env", default=None, help="fail unless the checkpoints are for this game")
  parser.add_argument("--png", default=None, help="Elo vs training step plot")
  parser.add_argument("--json", default=None)
  args = parser.parse_args(argv)
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.eval import tournament  # after parsing: --help stays fast

  try:
    t = tournament.run_tournament(
      checkpoints=args.checkpoint,
      step=args.step,
      all_steps=args.all_steps,
      bots=[b.strip() for b in args.bots.split(",") if b.strip()],
      games=args.games,
      simulations=args.simulations,
      seed=args.seed,
      anchor=args.anchor,
      env_id=args.env,
    )
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print()
  print(tournament.format_table(t.fit, t.players))
  if args.png:
    tournament.plot_elo(
      t.fit, t.players, args.png, f"{t.env_id}: Elo of checkpoints ({args.games} games per pair)"
    )
    print(f"wrote {args.png}")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(tournament.as_dict(t), f, indent=1)
    print(f"wrote {args.json}")
  return 0
