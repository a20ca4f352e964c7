"""Opponents for evaluation, by spec string, as `envs.Policy`s.

Specs: the game's bots (`envs.bots`: `random`, `mcts[:S]`, `optimal`,
`expectiminimax[:D]`, `greedy`, ...), or a saved agent,

    checkpoint:DIR[@STEP]  greedy search with its own search config
                           (`simulations` overrides its simulations)

A spec that does not apply to the game is a ValueError that says which games
it applies to.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import envs
import envs.bots
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import restore


def specs(env: Optional[envs.Env] = None) -> Tuple[str, ...]:
  """Every valid spec form; with `env`, those that can play it."""
  return envs.bots.specs(env) + ("checkpoint:DIR[@STEP]",)


@dataclasses.dataclass(frozen=True)
class Opponent:
  """A named policy.

  Attributes:
    name: a readable name, e.g. "mcts:64" or "ckpt:runs/x@2000".
    policy: an `envs.Policy`.
    step: the training step for a checkpoint opponent (None for bots).
  """

  name: str
  policy: envs.Policy
  step: Optional[int] = None


def parse_checkpoint_spec(text: str) -> Tuple[str, Optional[int]]:
  """`DIR` or `DIR@STEP` -> (DIR, STEP or None)."""
  directory, sep, step = text.rpartition("@")
  if not sep:
    return text, None
  try:
    return directory, int(step)
  except ValueError:
    raise ValueError(
      f"checkpoint spec {text!r}: the part after '@' must be a step number"
    ) from None


def make_opponent(spec: str, env: envs.Env, *, simulations: Optional[int] = None) -> Opponent:
  """The opponent `spec` (see the module docstring) for `env`.

  Raises:
    ValueError: an unknown spec, a bad argument, or a spec that does not
      apply to `env` (`anakin_mz.runtime.checkpoint.CheckpointError` for checkpoint
      problems, a ValueError subclass).
  """
  if not isinstance(spec, str) or not spec:
    raise ValueError(f"opponent spec must be a non-empty string; valid: {', '.join(specs(env))}")
  if spec.startswith("checkpoint:"):
    directory, step = parse_checkpoint_spec(spec[len("checkpoint:") :])
    if not directory:
      raise ValueError("opponent 'checkpoint:' needs a directory: checkpoint:DIR[@STEP]")
    return checkpoint_opponent(directory, step, env, simulations=simulations)
  try:
    name, policy = envs.bots.make_bot(spec, env)
  except envs.bots.UnknownBotError:
    raise ValueError(
      f"unknown opponent {spec!r} for {env.id}; valid: {', '.join(specs(env))} "
      f"(the opponents that play {env.id})"
    ) from None
  return Opponent(name, policy)


def checkpoint_opponent(
  directory: str, step: Optional[int], env: envs.Env, *, simulations: Optional[int] = None
) -> Opponent:
  """A saved agent (greedy search) as an opponent in `env`'s game.

  Raises:
    CheckpointError: a missing or unreadable checkpoint, or one for another
      game or game version.
  """
  loaded = restore.load_agent(directory, step, expect_env=env.id)
  if dict(loaded.env.params) != dict(env.params):
    raise ckpt.CheckpointError(
      f"checkpoint {directory!r} plays {env.id} with params "
      f"{dict(loaded.env.params)}, not {dict(env.params)}"
    )
  search = loaded.config.playing_search
  if simulations is not None:
    search = dataclasses.replace(search, num_simulations=int(simulations))
  policy = loaded.search_policy(search)
  return Opponent(f"ckpt:{directory}@{loaded.step}", policy, step=loaded.step)
