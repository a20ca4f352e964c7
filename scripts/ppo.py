"""`anakin-mz ppo`, as a checkout's script (anakin_mz/cli/ppo.py)."""

import sys

from anakin_mz.cli.ppo import main

if __name__ == "__main__":
  sys.exit(main())
