"""Play against a saved NDMZ agent in the terminal.

    anakin-mz play --env nannon --checkpoint runs/nannon/checkpoints
    anakin-mz play --env einstein --checkpoint runs/einstein/checkpoints --seat 1

You take seat `--seat` (in single-player and collaborative games you play
seat 0 and the agent plays the others). Before each of your moves you see the
board (with the dice), your legal moves and the agent's value estimate of the
position; on its turns the agent searches and shows its move and value.
Chance (dice) is drawn from the game's probabilities and printed. Type the
number of a move; bad input asks again. 'h' lists the moves again, 'q' quits.
The library behind it is `anakin_mz.eval.play`.
"""

from __future__ import annotations

import sys
from typing import Callable

import envs
from anakin_mz.cli import options


def main(argv=None, prog=None, read: Callable[[str], str] = input) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--env", required=True, help=f"one of {', '.join(envs.registered())}")
  parser.add_argument("--checkpoint", required=True, help=options.CHECKPOINT_HELP)
  parser.add_argument("--step", type=int, default=None)
  parser.add_argument("--seat", type=int, default=0)
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument("--agent", default="search", choices=("search", "greedy"))
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.env not in envs.registered():
    parser.error(f"unknown env {args.env!r}; registered envs: {', '.join(envs.registered())}")
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  from anakin_mz.runtime import restore as agent_lib
  from anakin_mz.eval import play

  try:
    agent = agent_lib.load_agent(args.checkpoint, args.step, expect_env=args.env)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not 0 <= args.seat < agent.env.num_players:
    parser.error(f"--seat must be in 0..{agent.env.num_players - 1}")
  try:
    return play.play(agent, args.seat, args.seed, args.simulations, args.agent, read)
  except (EOFError, KeyboardInterrupt):
    print("\nbye")
    return 0
