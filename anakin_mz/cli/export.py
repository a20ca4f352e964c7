"""Write a params-only model file from a checkpoint.

    anakin-mz export --checkpoint runs/nannon/checkpoints --out nannon.msgpack
    anakin-mz export --checkpoint runs/nannon/checkpoints --step 32000 --out m.msgpack
    anakin-mz play --env nannon --checkpoint nannon.msgpack

The file holds the network's parameters and the run's config (no replay
buffer, no optimizer state): a 2 x 256 Nannon model is 1.4 MB. evaluate,
play and show-search take it wherever they take a checkpoint. The library
behind it is `anakin_mz.runtime.export`.
"""

from __future__ import annotations

import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--checkpoint",
    required=True,
    help="checkpoint directory (<logdir>/checkpoints, or the run's <logdir>)",
  )
  parser.add_argument(
    "--step", type=options.integer, default=None, help="saved step (default latest)"
  )
  parser.add_argument("--out", required=True, help="the model file to write (.msgpack)")
  args = parser.parse_args(argv)
  if not args.out.endswith(".msgpack"):
    parser.error(f"--out {args.out!r}: a model file ends in .msgpack")
  from anakin_mz.runtime import checkpoint as ckpt
  from anakin_mz.runtime import export
  from anakin_mz.runtime import restore as agent_lib

  try:
    agent = agent_lib.load_agent(args.checkpoint, args.step)
    size = export.write(
      args.out, agent.config, agent.params, agent.step, agent.env.id, agent.env.version
    )
  except (ckpt.CheckpointError, ValueError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(f"wrote {args.out}: step {agent.step} of {agent.env.id}, {size / 1e6:.2f} MB")
  return 0
