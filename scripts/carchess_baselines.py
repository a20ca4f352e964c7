"""`anakin-mz carchess-baselines`, as a checkout's script (anakin_mz/cli/carchess_baselines.py)."""

import sys

from anakin_mz.cli.carchess_baselines import main

if __name__ == "__main__":
  sys.exit(main())
