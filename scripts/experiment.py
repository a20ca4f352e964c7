"""`anakin-mz experiment`, as a checkout's script (anakin_mz/cli/experiment.py)."""

import sys

from anakin_mz.cli.experiment import main

if __name__ == "__main__":
  sys.exit(main())
