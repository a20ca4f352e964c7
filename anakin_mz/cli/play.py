"""Play against a saved NDMZ agent in the terminal.

    anakin-mz play --env nannon --checkpoint runs/nannon/checkpoints
    anakin-mz play --env einstein --checkpoint runs/einstein/checkpoints --seat 1

You take seat `--seat` (in single-player and collaborative games you play
seat 0 and the agent plays the others). Before each of your moves you see the
board (with the dice), your legal moves and the agent's value estimate of the
position; on its turns the agent searches and shows its move and value.
Chance (dice) is drawn from the game's probabilities and printed. Type the
number of a move; bad input asks again. 'h' lists the moves again, 'q' quits.
The agent searches with its config's search settings (a model file's, as
exported) and plays its model file's player (`anakin-mz export --player`,
else search); --search KEY=VALUE, --simulations and --player override them:

    anakin-mz play --env nannon --checkpoint nannon --search root=puct --player greedy
The library behind it is `anakin_mz.eval.play`.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Callable

import envs
from anakin_mz.cli import options
from anakin_mz.core import players


def main(argv=None, prog=None, read: Callable[[str], str] = input) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--env", required=True, type=options.env_name, help=f"one of {', '.join(envs.registered())}"
  )
  parser.add_argument("--checkpoint", required=True, help=options.CHECKPOINT_HELP)
  parser.add_argument("--step", type=int, default=None)
  parser.add_argument("--seat", type=int, default=0)
  parser.add_argument("--simulations", type=int, default=None)
  options.add_player(
    parser,
    players.INTERACTIVE_PLAYERS,
    help="search: greedy search; greedy: the greedy network policy; "
    "default: a model file's own player (search where it names value), else search",
  )
  parser.add_argument(
    "--search",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="override a search setting of the checkpoint's config for this game "
    "(repeatable; e.g. --search root=puct --search backup=mean)",
  )
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.runtime import restore
  from anakin_mz.eval import play, report

  try:
    agent = restore.load_agent(args.checkpoint, args.step, expect_env=args.env)
    agent = dataclasses.replace(
      agent, config=report.with_search_overrides(agent.config, args.search)
    )
  except ValueError as e:  # CheckpointError is a ValueError
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not 0 <= args.seat < agent.env.num_players:
    parser.error(f"--seat must be in 0..{agent.env.num_players - 1}")
  kind = args.player
  if kind is None:
    kind = (
      agent.agent_kind
      if agent.agent_kind in players.INTERACTIVE_PLAYERS
      else players.DEFAULT_PLAYER
    )
    if kind != agent.agent_kind:
      print(f"note: play has no {agent.agent_kind} player; the search plays")
  try:
    return play.play(agent, args.seat, args.seed, args.simulations, kind, read)
  except (EOFError, KeyboardInterrupt):
    print("\nbye")
    return 0
