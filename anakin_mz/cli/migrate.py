"""Convert a checkpoint or model file of an older format to today's, once.

    anakin-mz migrate runs/nannon/checkpoints     # in place; the original kept
    anakin-mz migrate old.msgpack --out new.msgpack

Tools read today's formats only: one that meets an older checkpoint or model
file (the pmap run loop's checkpoints, with a leading device axis; a model
file without agent_kind; a config saved in an older layout) stops with one
line naming this command. PATH is a checkpoint directory (or the run's
logdir) or a model file.

In place by default, so that the command that stopped runs again as it was:
the converted copy is written beside PATH, then the original moves to
PATH.pre-migrate (kept, never deleted: remove it yourself once the migrated
one serves you) and the copy takes PATH's name. --out OUT writes the copy to
OUT (a new path) and leaves PATH as it was. A path already in today's format
is left alone. The params come through bit-identical; a pmap checkpoint
keeps device 0's state (the params were the same on every device; the other
devices' replay and self-play lanes are dropped). The library behind it is
`anakin_mz.runtime.migrate`.
"""

from __future__ import annotations

import sys

from anakin_mz.cli import options


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "path", metavar="PATH", help="a checkpoint directory, a logdir or a model file"
  )
  parser.add_argument(
    "--out",
    default=None,
    help="write today's format here (a new path) and leave PATH as it was "
    "(default: in place, the original kept as PATH.pre-migrate)",
  )
  args = parser.parse_args(argv)
  from anakin_mz import agents  # noqa: F401 (registers every agent: a config names one)
  from anakin_mz.runtime import checkpoint as ckpt
  from anakin_mz.runtime import migrate

  try:
    done = migrate.migrate(args.path, args.out)
  except (ckpt.CheckpointError, ValueError, OSError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not done.changes:
    print(f"{done.path} is in today's format already: nothing to do")
    return 0
  kept = f"; the original is kept as {done.kept}" if done.kept else ""
  print(f"migrated {done.path} to {done.out}: {'; '.join(done.changes)}{kept}")
  return 0
