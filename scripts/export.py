"""`anakin-mz export`, as a checkout's script (anakin_mz/cli/export.py)."""

import sys

from anakin_mz.cli.export import main

if __name__ == "__main__":
  sys.exit(main())
