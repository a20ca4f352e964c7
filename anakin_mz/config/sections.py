"""Config sections from their YAML mappings: dacite builds each frozen
dataclass (`anakin_mz.config` explains the choice), and this module words
its exceptions as the config has always worded them.

`build_section(cls, values, section)` is the entry point; `parse_number`
reads the numeric spellings YAML 1.1 leaves as strings.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import typing
from typing import Dict, Mapping

import dacite


def parse_number(value: object) -> object:
  """A number written as text in any common spelling (`3e-4`, `1e9`, `1_000`,
  `.5`, which YAML 1.1 partly reads as strings) -> int or float; anything
  else unchanged."""
  if not isinstance(value, str):
    return value
  text = value.strip()
  for parse in (int, float):
    try:
      return parse(text)
    except ValueError:
      pass
  return value


# ------------------------------------------ a section's mapping -> dataclass
#
# dacite builds each section's dataclass from its mapping: `strict` refuses
# an unknown key, the type hooks read the numeric spellings (`_as_int`,
# `_as_float`) and lists (`_as_tuple`), and its type check against the
# field's annotation refuses the rest. `_build_section` words dacite's
# exceptions as this module always has.


class _NotFinite(dacite.DaciteFieldError):
  """A hook's refusal of an infinite or NaN number (dacite adds the field)."""

  def __init__(self, value: float):
    super().__init__()
    self.value = value


def _finite(value: float) -> float:
  if not math.isfinite(value):
    raise _NotFinite(value)
  return value


def _as_int(value: object) -> object:
  """The type hook of int fields (and of an int tuple's items): a number in
  any spelling (`parse_number`), an integral float as the int; anything else
  unchanged, for dacite's type check. A bool is refused here: it is an int
  to `isinstance`."""
  if isinstance(value, bool):
    raise dacite.WrongTypeError(int, value)
  value = parse_number(value)
  if isinstance(value, float) and _finite(value).is_integer():
    return int(value)
  return value


def _as_float(value: object) -> object:
  """The type hook of float fields: a number in any spelling, an int as the
  float; anything else unchanged, for dacite's type check."""
  if isinstance(value, bool):
    raise dacite.WrongTypeError(float, value)
  value = parse_number(value)
  if isinstance(value, int):
    return float(value)
  if isinstance(value, float):
    return _finite(value)
  return value


def _as_tuple(value: object) -> object:
  """The type hook of tuple fields: a YAML list is the tuple (whose items
  dacite then builds with their type's hook); not a list, refused."""
  if isinstance(value, (list, tuple)):
    return tuple(value)
  raise dacite.WrongTypeError(tuple, value)


@functools.lru_cache(maxsize=None)
def _dacite_config(cls: type) -> dacite.Config:
  """dacite's settings for section `cls`: its tuple annotations (`hidden:
  Tuple[int, ...]`, and inside Optional) get `_as_tuple`."""
  hooks: Dict[object, object] = {int: _as_int, float: _as_float}
  for hint in typing.get_type_hints(cls).values():
    for t in (hint, *typing.get_args(hint)):
      if typing.get_origin(t) is tuple:
        hooks[t] = _as_tuple
  return dacite.Config(type_hooks=hooks, strict=True)  # type: ignore[arg-type]


def _default(field: dataclasses.Field) -> object:
  if field.default is not dataclasses.MISSING:
    return field.default
  if field.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
    return field.default_factory()  # type: ignore[misc]
  return None


def _wrong_type(cls, section: str, name: str, value: object, error: dacite.DaciteError) -> str:
  """The message for field `name` of `section` given `value`, which is not
  of the field's type (`error`): what type it takes, like its default."""
  default = _default({f.name: f for f in dataclasses.fields(cls)}[name])
  if isinstance(error, _NotFinite) and default is not None:
    return f"{section}.{name} must be a finite number, got {error.value!r}"
  if default is None:
    # A field that defaults to None (`search.max_depth`, `value_bounds`):
    # its dataclass words what it takes.
    try:
      cls(**{name: value})
    except (TypeError, ValueError) as e:
      return f"invalid {section!r} config: {e}"
    return f"{section}.{name} must be null or of the type it takes, got {value!r}"
  if isinstance(default, (int, float)) and not isinstance(default, bool):
    value = parse_number(value)
  kind = type(default).__name__
  if isinstance(default, tuple) and isinstance(value, (list, tuple)):
    items = sorted({type(d).__name__ for d in default}) or ["number"]
    kind = f"tuple of {' or '.join(items)}"  # the items are wrong
  return f"{section}.{name} must be of type {kind} (like its default {default!r}), got {value!r}"


def build_section(cls, values: Mapping[str, object], section: str):
  """Config section `section` (its mapping `values`) -> dataclass `cls`,
  built by dacite (above) and checked by the dataclass."""
  if not isinstance(values, Mapping):
    raise ValueError(f"config section {section!r} must be a mapping, got {values!r}")
  try:
    return dacite.from_dict(cls, dict(values), config=_dacite_config(cls))
  except dacite.UnexpectedDataError as e:
    valid = sorted(f.name for f in dataclasses.fields(cls))
    raise ValueError(
      f"unknown key(s) {', '.join(section + '.' + k for k in sorted(e.keys))}; "
      f"valid keys in {section!r}: {', '.join(valid)}"
    ) from None
  except (_NotFinite, dacite.WrongTypeError) as e:
    name = str(e.field_path)
    raise ValueError(_wrong_type(cls, section, name, values[name], e)) from None
  except (TypeError, ValueError, dacite.DaciteError) as e:
    raise ValueError(f"invalid {section!r} config: {e}") from None


def top_level_number(value: object, name: str) -> float:
  """A top-level float setting (`discount`), read as a float field is."""
  try:
    number = _as_float(value)
  except _NotFinite as e:
    raise ValueError(f"{name} must be a finite number, got {e.value!r}") from None
  except dacite.WrongTypeError:
    number = value
  if not isinstance(number, float):
    raise ValueError(
      f"{name} must be of type float (like its default 1.0), got {parse_number(value)!r}"
    )
  return number
