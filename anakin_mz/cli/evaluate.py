"""Evaluate a saved NDMZ agent (an Orbax checkpoint of `anakin-mz train`).

    anakin-mz evaluate --checkpoint runs/nannon/checkpoints
    anakin-mz evaluate --checkpoint runs/nannon/checkpoints --opponent optimal --games 2000
    anakin-mz evaluate --checkpoint runs/einstein/checkpoints --opponent expectiminimax:2
    anakin-mz evaluate --checkpoint runs/breakthrough/checkpoints --opponent mcts:200
    anakin-mz evaluate --checkpoint runs/a/checkpoints \
        --opponent checkpoint:runs/b/checkpoints@4000
    anakin-mz evaluate --checkpoint runs/nannon/checkpoints --diagnostics --json eval.json
    anakin-mz evaluate --env einstein --bot expectiminimax:2 --games 2000
    anakin-mz evaluate --env breakthrough --param rows=6 --param columns=6 --bot mcts:256

The params and config come from the checkpoint (latest step unless --step;
--last-checkpoints N plays the same games with each of the N newest and
pools them);
a model file's config and player (`anakin-mz export --search/--player`) are
the defaults, which --search, --simulations and --player override (`--player
greedy` plays the policy head alone, `--player value` the value head alone).
Any problem with it (a missing path or step, another game, a network that
does not fit the arrays, a corrupt step) is an error naming the path: there is
never a fallback to fresh weights. With --bot (and --env) a bot of the game
is evaluated instead, in the same match. The opponents are the game's bots
(`envs.bots`) or another checkpoint; games with extra evaluators (Nannon's
exact win probabilities) add them (--no-extra skips them). --diagnostics adds
the NDMZ paper's dynamics tests on random-play games. The library behind it is
`anakin_mz.eval.report`.
"""

from __future__ import annotations

import json
import os
import sys

import envs
from anakin_mz.cli import options
from anakin_mz.core import players


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--checkpoint", default=None, help=options.CHECKPOINT_HELP)
  parser.add_argument(
    "--bot", default=None, help="evaluate this bot of --env instead of a checkpoint"
  )
  parser.add_argument(
    "--param", action="append", default=[], help="KEY=VALUE game parameter for --bot (repeatable)"
  )
  parser.add_argument("--step", type=int, default=None, help="saved step (default latest)")
  parser.add_argument(
    "--last-checkpoints",
    type=options.integer,
    default=None,
    metavar="N",
    help="evaluate each of the N newest saved steps with the same games and pool them "
    "(one checkpoint's score can move by more than its interval between neighbours)",
  )
  parser.add_argument(
    "--env",
    default=None,
    type=options.env_name,
    help="the game (--bot); with --checkpoint: fail unless it is for this game",
  )
  parser.add_argument(
    "--opponent",
    default=None,
    help="a bot of the game (random, optimal, expectiminimax[:depth], "
    "mcts[:simulations], greedy) or checkpoint:DIR[@STEP] "
    "(two-player games; default random)",
  )
  parser.add_argument("--games", type=int, default=1000)
  parser.add_argument(
    "--simulations",
    type=int,
    default=None,
    help="search simulations (default: the checkpoint's config)",
  )
  options.add_player(
    parser,
    players.PLAYERS,
    help="search: greedy search; greedy: the greedy network policy; "
    "value: the value head in an expectimax of search.expectimax_depth moves on the real "
    "game (a diagnostic of the value head alone); default: a model file's own "
    "(anakin-mz export --player), else search",
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default=None, help="also write the results here")
  parser.add_argument(
    "--diagnostics", action="store_true", help="run the dynamics tests (NDMZ paper 4.3)"
  )
  parser.add_argument("--diagnostic-games", type=int, default=500)
  parser.add_argument(
    "--no-extra",
    action="store_true",
    help="skip the game's extra evaluators (nannon's exact scores)",
  )
  parser.add_argument(
    "--extra-policies",
    default=None,
    help="comma-separated: which policies the game's extra evaluators score (nannon's "
    "exact tables; a game without one refuses it), of greedy, search, value, and the "
    "planning diagnosis's model_1ply, model_chance and "
    "true_tree (anakin_mz/eval/planning.py); default greedy and search (nannon 12-5-6's exact "
    "search table takes a search for each of 10.6M decision states, ~20 min a core)",
  )
  parser.add_argument(
    "--search",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="override a search setting of the checkpoint's config for this evaluation "
    "(repeatable; e.g. --search root=gumbel --search chance_mode=prior_minus_visits)",
  )
  args = parser.parse_args(argv)
  if args.search and args.bot is not None:
    parser.error("--search changes a --checkpoint's search; a --bot has its own")
  if (args.checkpoint is None) == (args.bot is None):
    parser.error("give exactly one of --checkpoint DIR and --bot SPEC")
  if args.bot is not None and args.env is None:
    parser.error("--bot needs --env")
  if args.extra_policies is not None and (args.no_extra or args.bot is not None):
    parser.error(
      "--extra-policies chooses what the extra evaluators of a --checkpoint score; "
      "it cannot go with --no-extra or --bot"
    )
  if args.last_checkpoints is not None and args.bot is not None:
    parser.error("--last-checkpoints picks a --checkpoint's steps; a --bot has none")
  if args.param and args.bot is None:
    parser.error("--param is for --bot (a checkpoint holds its game parameters)")
  if args.json:
    parent = os.path.dirname(os.path.abspath(args.json))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
      parser.error(f"cannot write --json {args.json!r}: {parent!r} is not a writable directory")
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.eval import report  # after parsing: --help stays fast

  try:
    if args.bot is not None:
      env = envs.make(args.env, **report.parse_params(args.param))
      result = report.evaluate_bot(
        env,
        args.bot,
        opponent=args.opponent,
        games=args.games,
        seed=args.seed,
        simulations=args.simulations,
      )
    else:
      result = report.evaluate_checkpoint(
        args.checkpoint,
        step=args.step,
        opponent=args.opponent,
        games=args.games,
        simulations=args.simulations,
        seed=args.seed,
        agent_kind=args.player,
        expect_env=args.env,
        extra=not args.no_extra,
        extra_policies=None if args.extra_policies is None else args.extra_policies.split(","),
        diagnostics=args.diagnostics,
        diagnostic_games=args.diagnostic_games,
        search_overrides=args.search,
        last=args.last_checkpoints,
      )
  except ValueError as e:  # CheckpointError is a ValueError
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(report.format_report(result))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({k: v for k, v in result.items() if k != "dynamics_table"}, f, indent=1)
    print(f"wrote {args.json}")
  return 0
