"""Draw one NDMZ search tree, as text and as SVG (in the spirit of MooZi's
Figure 5.9).

    anakin-mz show-search --checkpoint runs/nannon/checkpoints
    anakin-mz show-search --checkpoint runs/nannon/checkpoints --moves 6 --seed 3 \
        --simulations 50 --svg tree.svg

The position is reached from a new game by `--moves` uniformly random
transitions (chance outcomes drawn from the game's probabilities), then on to
the next decision node. One search (no root noise, as in evaluation) runs
there; every node of its tree is printed with

* its kind as the search decided it from the identity head (choice node of
  player P, chance node, terminal node) - the *predicted identity*,
* the prior of the edge into it (choice policy or chance policy of the parent),
* visits N, Q of the edge (reward + value, seen from the parent's mover), the
  predicted reward r of the edge and the node's value V (root mover's view),
* the true game state reached by the same actions (MooZi's overlay): its
  kind, or "delusion" when the action was illegal there or the model's node
  kind is wrong (a choice node where the game is at chance, ...).

The library behind it is `anakin_mz.eval.search_tree`.
"""

from __future__ import annotations

import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--checkpoint", required=True, help=options.CHECKPOINT_HELP)
  parser.add_argument("--step", type=int, default=None)
  parser.add_argument(
    "--moves", type=int, default=0, help="random transitions before the searched position"
  )
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument(
    "--depth", type=int, default=None, help="draw this many levels below the root (>= 0)"
  )
  parser.add_argument("--svg", default="search_tree.svg", help="SVG output path")
  args = parser.parse_args(argv)
  if args.moves < 0:
    parser.error("--moves must be >= 0")
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  if args.depth is not None and args.depth < 0:
    parser.error(f"--depth must be >= 0 (0 draws the root alone), got {args.depth}")
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.runtime import restore
  from anakin_mz.eval import search_tree

  try:
    agent = restore.load_agent(args.checkpoint, args.step)
    text, svg = search_tree.show(
      agent, moves=args.moves, seed=args.seed, simulations=args.simulations, max_depth=args.depth
    )
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(text)
  try:
    with open(args.svg, "w", encoding="utf-8") as f:
      f.write(svg)
  except OSError as e:
    print(f"error: cannot write --svg {args.svg!r}: {e}", file=sys.stderr)
    return 2
  print(f"\nwrote {args.svg}")
  return 0
