"""`anakin-mz evaluate`, as a checkout's script (anakin_mz/cli/evaluate.py)."""

import sys

from anakin_mz.cli.evaluate import main

if __name__ == "__main__":
  sys.exit(main())
