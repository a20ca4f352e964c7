"""`anakin-mz play`, as a checkout's script (anakin_mz/cli/play.py)."""

import sys

from anakin_mz.cli.play import main

if __name__ == "__main__":
  sys.exit(main())
