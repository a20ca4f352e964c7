"""`anakin-mz plot`, as a checkout's script (anakin_mz/cli/plot.py)."""

import sys

from anakin_mz.cli.plot import main

if __name__ == "__main__":
  sys.exit(main())
