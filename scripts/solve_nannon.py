"""`anakin-mz solve-nannon`, as a checkout's script (anakin_mz/cli/solve_nannon.py)."""

import sys

from anakin_mz.cli.solve_nannon import main

if __name__ == "__main__":
  sys.exit(main())
