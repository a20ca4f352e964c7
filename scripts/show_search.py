"""`anakin-mz show-search`, as a checkout's script (anakin_mz/cli/show_search.py)."""

import sys

from anakin_mz.cli.show_search import main

if __name__ == "__main__":
  sys.exit(main())
