"""`anakin-mz train`, as a checkout's script (anakin_mz/cli/train.py)."""

import sys

from anakin_mz.cli.train import main

if __name__ == "__main__":
  sys.exit(main())
