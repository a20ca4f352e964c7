"""`anakin-mz strength`, as a checkout's script (anakin_mz/cli/strength.py)."""

import sys

from anakin_mz.cli.strength import main

if __name__ == "__main__":
  sys.exit(main())
