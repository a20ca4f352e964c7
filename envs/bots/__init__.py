"""Game-owned players and evaluators, by name: games declare their own.

A *bot* is a `Policy` (`envs.policy`) built from a spec string:

    policy = envs.bots.make_bot("expectiminimax:2", env)

    random                 uniformly random legal moves (every game)
    mcts[:S]               UCT with random rollouts on the true game (`uct.py`),
                           S simulations (default 64); deterministic
                           two-player zero-sum games
    optimal                the exact optimal player (nannon)
    expectiminimax[:D]     depth-D expectiminimax (einstein; D defaults to 2)
    greedy                 the one-round lookahead heuristic (carchess)

An *evaluator* is extra, game-specific scoring of any policies (Nannon's
exact win probabilities): `evaluators(env.id)` lists those of a game.

A game adds its bots in a module of this package that calls `register_bot`
(and `register_evaluator`), imported at the bottom of this file. The agent
(`anakin_mz`) only asks this registry, so it never names a game.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import jax

from envs.core import Env
from envs.policy import Policy, random_policy


@dataclasses.dataclass(frozen=True)
class Bot:
  """A registered bot.

  Attributes:
    name: the spec's name, e.g. "expectiminimax".
    make: `make(env)`, or `make(env, arg)` when the bot takes an argument,
      returning a `Policy`.
    games: the env ids it is written for (None: any game `applies` accepts).
    needs: what a game must offer, for error messages ("an exact solver").
    applies: `applies(env) -> bool` for bots that are not tied to games.
    arg: the name of its optional integer argument (e.g. "depth"), or None.
    default: the argument's default.
  """

  name: str
  make: Callable[..., Policy]
  games: Optional[Tuple[str, ...]] = None
  needs: str = ""
  applies: Optional[Callable[[Env], bool]] = None
  arg: Optional[str] = None
  default: Optional[int] = None

  @property
  def spec(self) -> str:
    return f"{self.name}[:{self.arg}]" if self.arg else self.name

  def why_not(self, env: Env) -> Optional[str]:
    """None if the bot can play `env`, else why not."""
    if self.games is not None and env.id not in self.games:
      return (
        f"bot {self.name!r} needs {self.needs} ({', '.join(self.games)}); env {env.id!r} has none"
      )
    if self.applies is not None and not self.applies(env):
      return (
        f"bot {self.name!r} needs {self.needs}; env {env.id!r} has "
        f"{env.num_players} players, payoff {env.payoff!r}, "
        f"{env.num_chance_outcomes} chance outcomes"
      )
    return None


@dataclasses.dataclass(frozen=True)
class Evaluator:
  """Extra, game-specific scoring of policies (e.g. exact win rates).

  Attributes:
    name: the result's key (JSON) and TensorBoard prefix, e.g. "exact".
    games: the env ids it applies to.
    score: `score(env, policies, key) -> {f"{name}_{what}": value}` for the
      named policies; `key` is the one PRNG key each policy is called with.
    reference: `reference(env) -> {what: value}`, figures of the game's own
      players to read the scores against (may be empty).
    format: `format(values) -> str`, a readable table of score + reference.
  """

  name: str
  games: Tuple[str, ...]
  score: Callable[[Env, Mapping[str, Policy], jax.Array], Dict[str, float]]
  reference: Callable[[Env], Dict[str, float]]
  format: Callable[[Mapping[str, float]], str]


_BOTS: Dict[str, Bot] = {}
_EVALUATORS: List[Evaluator] = []


def register_bot(bot: Bot) -> Bot:
  if bot.name in _BOTS:
    raise ValueError(f"bot {bot.name!r} is already registered")
  _BOTS[bot.name] = bot
  return bot


def register_evaluator(evaluator: Evaluator) -> Evaluator:
  _EVALUATORS.append(evaluator)
  return evaluator


class UnknownBotError(ValueError):
  """A bot name that is not registered."""


def specs(env: Optional[Env] = None) -> Tuple[str, ...]:
  """Every registered bot's spec, e.g. ("random", "mcts[:simulations]", ...);
  with `env`, only those of the bots that can play it."""
  return tuple(b.spec for b in _BOTS.values() if env is None or b.why_not(env) is None)


def _split_arg(spec: str, bot: Bot) -> Optional[int]:
  _, sep, text = spec.partition(":")
  if not sep:
    return bot.default
  if bot.arg is None:
    raise ValueError(f"bot {bot.name!r} takes no argument, got {spec!r}")
  try:
    value = int(text)
  except ValueError:
    raise ValueError(f"bot {spec!r}: {bot.arg} must be an integer, got {text!r}") from None
  if value < 1:
    raise ValueError(f"bot {spec!r}: {bot.arg} must be >= 1, got {value}")
  return value


def make_bot(spec: str, env: Env) -> Tuple[str, Policy]:
  """(canonical name, `Policy`) of bot `spec` for `env`, e.g. "mcts" ->
  ("mcts:64", policy).

  Raises:
    UnknownBotError: an unknown bot (the message lists `env`'s bots).
    ValueError: a bad argument, or a bot that cannot play `env` (the
      message says which games it is for).
  """
  name = spec.partition(":")[0]
  if name not in _BOTS:
    raise UnknownBotError(
      f"unknown bot {spec!r} for {env.id}; valid: {', '.join(specs(env))} "
      f"(the bots that play {env.id})"
    )
  bot = _BOTS[name]
  arg = _split_arg(spec, bot)
  reason = bot.why_not(env)
  if reason:
    raise ValueError(f"{reason}; the bots that play {env.id}: {', '.join(specs(env))}")
  if bot.arg is None:
    return bot.name, bot.make(env)
  return f"{bot.name}:{arg}", bot.make(env, arg)


def evaluators(game: str) -> Tuple[Evaluator, ...]:
  """The extra evaluators of the game with env id `game` (often none)."""
  return tuple(e for e in _EVALUATORS if game in e.games)


register_bot(Bot("random", lambda env: random_policy))

# Each import registers one game's bots (or a generic one).
from envs.bots import uct  # noqa: E402,F401
from envs.bots import nannon  # noqa: E402,F401
from envs.bots import einstein  # noqa: E402,F401
from envs.bots import carchess  # noqa: E402,F401
