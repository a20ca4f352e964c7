"""`anakin-mz tournament`, as a checkout's script (anakin_mz/cli/tournament.py)."""

import sys

from anakin_mz.cli.tournament import main

if __name__ == "__main__":
  sys.exit(main())
