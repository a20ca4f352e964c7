"""Checks the config dataclasses of core share when they validate their fields."""

import numbers


def is_int(x) -> bool:
  """Whether `x` is an integer (a Python or NumPy one), booleans excluded.

  YAML and the command line give `true` for a mistyped count; bool is an
  int subclass in Python, so a plain isinstance check would accept it as 1.
  """
  return isinstance(x, numbers.Integral) and not isinstance(x, bool)
