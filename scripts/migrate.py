"""`anakin-mz migrate`, as a checkout's script (anakin_mz/cli/migrate.py)."""

import sys

from anakin_mz.cli.migrate import main

if __name__ == "__main__":
  sys.exit(main())
