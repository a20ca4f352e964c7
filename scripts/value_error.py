"""`anakin-mz value-error`, as a checkout's script (anakin_mz/cli/value_error.py)."""

import sys

from anakin_mz.cli.value_error import main

if __name__ == "__main__":
  sys.exit(main())
