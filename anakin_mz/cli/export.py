"""Write a params-only model file from a checkpoint (or from another model file).

    anakin-mz export --checkpoint runs/nannon/checkpoints --out nannon.msgpack
    anakin-mz export --checkpoint runs/nannon/checkpoints --step 32000 --out m.msgpack
    anakin-mz export --checkpoint nannon.msgpack --out gumbel.msgpack \
        --search root=gumbel --search backup=expectation --player search
    anakin-mz play --env nannon --checkpoint nannon.msgpack

The file holds the network's parameters and the run's config (no replay
buffer, no optimizer state): a 2 x 256 Nannon model is 1.4 MB. It also
carries the play settings to score and ship: --search KEY=VALUE (repeatable,
the keys of the config's search section, checked as `evaluate --search`
checks them) changes the config's playing search (`play_search`), which
every tool then searches with (the search self-play trained with stays in
the config as it was); --player (search, greedy or value) names the player `evaluate` and
`play` use unless their own --player says otherwise (default: the input model
file's, else search). evaluate, play, show-search and tournament take the
file wherever they take a checkpoint. The library behind it is
`anakin_mz.runtime.export`.
"""

from __future__ import annotations

import sys

from anakin_mz.cli import options
from anakin_mz.core import players


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--checkpoint",
    required=True,
    help=options.CHECKPOINT_HELP,
  )
  parser.add_argument(
    "--step", type=options.integer, default=None, help="saved step (default latest)"
  )
  parser.add_argument("--out", required=True, help="the model file to write (.msgpack)")
  parser.add_argument(
    "--search",
    action="append",
    default=[],
    metavar="KEY=VALUE",
    help="set a search setting of the file's config (repeatable; e.g. --search root=gumbel "
    "--search backup=expectation)",
  )
  options.add_player(
    parser,
    players.PLAYERS,
    help="the player evaluate and play use by default (default: the input model file's, "
    "else search)",
  )
  args = parser.parse_args(argv)
  if not args.out.endswith(".msgpack"):
    parser.error(f"--out {args.out!r}: a model file ends in .msgpack")
  from anakin_mz import agents  # noqa: F401 (registers every agent)
  from anakin_mz.eval import report
  from anakin_mz.runtime import checkpoint as ckpt
  from anakin_mz.runtime import export
  from anakin_mz.runtime import restore

  try:
    agent = restore.load_agent(args.checkpoint, args.step)
    config = report.with_search_overrides(agent.config, args.search)
    kind = agent.agent_kind if args.player is None else args.player
    size = export.write(
      args.out, config, agent.params, agent.step, agent.env.id, agent.env.version, kind
    )
  except (ckpt.CheckpointError, ValueError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  search = f", search {', '.join(args.search)}" if args.search else ""
  print(
    f"wrote {args.out}: step {agent.step} of {agent.env.id}, plays {kind}{search}, "
    f"{size / 1e6:.2f} MB"
  )
  return 0
