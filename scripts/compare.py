"""`anakin-mz compare`, as a checkout's script (anakin_mz/cli/compare.py)."""

import sys

from anakin_mz.cli.compare import main

if __name__ == "__main__":
  sys.exit(main())
