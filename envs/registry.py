"""A validating registry of games, in the style of `gymnax.registration`.

Other installed packages add games through the `anakin_mz.games` entry
points, read the first time the registry is queried (`envs.plugins`).
"""

from __future__ import annotations

from typing import Dict, Mapping, Tuple, Type

from envs import plugins
from envs.core import PAYOFF_KINDS, Env, Game, ParamValue

_REGISTRY: Dict[str, Type[Game]] = {}


def register(cls: Type[Game]) -> Type[Game]:
  """Class decorator: adds a `Game` subclass to the registry under `cls.name`."""
  if not cls.name:
    raise ValueError(f"{cls.__name__} has no `name`")
  if cls.name in _REGISTRY:
    raise ValueError(f"game {cls.name!r} is already registered")
  if cls.payoff not in PAYOFF_KINDS:
    raise ValueError(f"{cls.__name__}.payoff must be one of {PAYOFF_KINDS}, got {cls.payoff!r}")
  _REGISTRY[cls.name] = cls
  return cls


def _add_plugin(name: str, obj: object) -> None:
  """Registers the game class entry point `name` loads (`envs.plugins`);
  one its module registered already (`@envs.register`) stands."""
  if not (isinstance(obj, type) and issubclass(obj, Game)):
    raise ValueError(f"names {obj!r}, which is not an envs.Game subclass")
  if obj.name != name:
    raise ValueError(
      f"the entry point's name must be the game's: {obj.__name__}.name is {obj.name!r}"
    )
  if _REGISTRY.get(name) is not obj:
    register(obj)


_PLUGINS = plugins.Plugins(plugins.GAMES, _add_plugin)


def registered(adapted: bool = True) -> Tuple[str, ...]:
  """The names of all registered games, sorted. `adapted=False` leaves out
  the games wrapped from gymnax and pgx (`minatar-*`, `pgx-*`: their classes
  set `adapted = True`), e.g. for checks that need a training config.
  Plugins' games (`envs.plugins`) included."""
  _PLUGINS.load()
  return tuple(
    sorted(n for n, c in _REGISTRY.items() if adapted or not getattr(c, "adapted", False))
  )


def default_params(name: str) -> Dict[str, ParamValue]:
  """The parameters of game `name` with their defaults."""
  return dict(_game_class(name).default_params)


def _game_class(name: str) -> Type[Game]:
  _PLUGINS.load()
  if not isinstance(name, str) or name not in _REGISTRY:
    raise ValueError(f"unknown env {name!r}; registered envs: {', '.join(registered())}")
  return _REGISTRY[name]


def _type_ok(value: object, default: ParamValue) -> bool:
  if isinstance(default, bool):
    return isinstance(value, bool)
  if isinstance(default, int):
    return isinstance(value, int) and not isinstance(value, bool)
  if isinstance(default, float):
    return isinstance(value, (int, float)) and not isinstance(value, bool)
  return isinstance(value, type(default))


def make(name: str, **params: ParamValue) -> Env:
  """Builds the registered game `name` with `params` overriding its defaults.

  Raises:
    ValueError: unknown name, unknown parameter, a value of the wrong type, or
      a value the game rejects. The message lists what is valid.
  """
  return build(_game_class(name), params)


def build(cls: Type[Game], params: Mapping[str, ParamValue]) -> Env:
  """`make` for a game class that may not be registered (the adapters build
  them on the fly): validates `params` against `cls.default_params` and
  `cls.validate_params`, and wraps the game in `cls.env_class` (`Env`
  unless the class names another, e.g. a hidden-chance adapter)."""
  name = cls.name
  params = dict(params)
  defaults = dict(cls.default_params)
  unknown = sorted(set(params) - set(defaults))
  if unknown:
    valid = ", ".join(f"{k}={v!r}" for k, v in defaults.items()) or "none"
    raise ValueError(
      f"unknown parameter(s) {unknown} for env {name!r}; valid parameters (with defaults): {valid}"
    )
  for key, value in params.items():
    if not _type_ok(value, defaults[key]):
      raise ValueError(
        f"env {name!r}: parameter {key!r} must be of type "
        f"{type(defaults[key]).__name__}, got {value!r}"
      )
    if isinstance(defaults[key], float):
      params[key] = float(value)
  full = {**defaults, **params}
  cls.validate_params(full)
  return getattr(cls, "env_class", Env)(cls(**full))
