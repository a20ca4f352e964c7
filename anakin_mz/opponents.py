"""Opponents for evaluation, by spec string, as batched jittable policies
`policy(key, state [B]) -> action [B]` (the `anakin_mz.evaluation.Policy`
convention; only read at decision nodes).

Specs:

    random                 uniformly random legal moves (every game)
    optimal                the exact optimal player (nannon: envs.nannon_solver)
    expectiminimax[:D]     depth-D expectiminimax (einstein; D defaults to 2)
    mcts[:S]               UCT with random rollouts on the true game, S
                           simulations (deterministic two-player zero-sum
                           games, e.g. breakthrough; S defaults to 64)
    greedy                 the one-round greedy heuristic (carchess)
    checkpoint:DIR[@STEP]  a saved agent (greedy search with its own search
                           config; --simulations overrides its simulations)

A spec that does not apply to the game is a ValueError that says which games
it applies to.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional, Tuple

import chex
import jax

import envs
from anakin_mz import evaluation

Policy = evaluation.Policy

SPECS = ("random", "optimal", "expectiminimax[:depth]", "mcts[:simulations]",
         "greedy", "checkpoint:DIR[@STEP]")


@dataclasses.dataclass(frozen=True)
class Opponent:
  """A named batched policy.

  Attributes:
    name: a readable name, e.g. "mcts:64" or "ckpt:runs/x@2000".
    policy: `policy(key, state [B]) -> action [B]`.
    step: the training step for a checkpoint opponent (None for bots).
  """
  name: str
  policy: Policy
  step: Optional[int] = None


def _from_state_key(batched: Callable[[envs.State, chex.PRNGKey], chex.Array]
                    ) -> Policy:
  """Adapts a batched `(state, key)` player to `(key, state)`."""
  return lambda key, state: batched(state, key)


def _vmapped(single: Callable[[envs.State, chex.PRNGKey], chex.Array]) -> Policy:
  """Adapts an unbatched `(state, key)` player to a batched `(key, state)`."""

  def policy(key, state):
    keys = jax.random.split(key, state.current_player.shape[0])
    return jax.vmap(single)(state, keys)
  return policy


def _split_arg(spec: str, default: int, what: str) -> Tuple[str, int]:
  name, _, arg = spec.partition(":")
  if not arg:
    return name, default
  try:
    value = int(arg)
  except ValueError:
    raise ValueError(f"opponent {spec!r}: {what} must be an integer, "
                     f"got {arg!r}") from None
  if value < 1:
    raise ValueError(f"opponent {spec!r}: {what} must be >= 1, got {value}")
  return name, value


def parse_checkpoint_spec(text: str) -> Tuple[str, Optional[int]]:
  """`DIR` or `DIR@STEP` -> (DIR, STEP or None)."""
  directory, sep, step = text.rpartition("@")
  if not sep:
    return text, None
  try:
    return directory, int(step)
  except ValueError:
    raise ValueError(f"checkpoint spec {text!r}: the part after '@' must be a "
                     "step number") from None


def make_opponent(spec: str, env: envs.Env, *,
                  simulations: Optional[int] = None) -> Opponent:
  """The opponent `spec` (see the module docstring) for `env`.

  Raises:
    ValueError: an unknown spec, a bad argument, or a spec that does not
      apply to `env` (`anakin_mz.checkpoint.CheckpointError` for checkpoint
      problems, a ValueError subclass).
  """
  if not isinstance(spec, str) or not spec:
    raise ValueError(f"opponent spec must be a non-empty string; valid: {', '.join(SPECS)}")
  if spec.startswith("checkpoint:"):
    directory, step = parse_checkpoint_spec(spec[len("checkpoint:"):])
    if not directory:
      raise ValueError("opponent 'checkpoint:' needs a directory: checkpoint:DIR[@STEP]")
    return checkpoint_opponent(directory, step, env, simulations=simulations)
  if spec == "random":
    return Opponent("random", evaluation.random_policy)
  if spec == "optimal":
    if env.id != "nannon":
      raise ValueError(f"opponent 'optimal' needs a game with an exact solver "
                       f"(nannon); env {env.id!r} has none")
    from envs import nannon_solver  # pylint: disable=import-outside-toplevel
    return Opponent("optimal", _vmapped(nannon_solver.optimal_policy(env)))
  if spec.startswith("expectiminimax"):
    name, depth = _split_arg(spec, 2, "depth")
    if name != "expectiminimax":
      raise ValueError(f"unknown opponent {spec!r}; valid: {', '.join(SPECS)}")
    if env.id != "einstein":
      raise ValueError(f"opponent 'expectiminimax' is written for einstein; "
                       f"env {env.id!r} has none")
    from envs import einstein_players  # pylint: disable=import-outside-toplevel
    return Opponent(f"expectiminimax:{depth}", _from_state_key(
        einstein_players.make_expectiminimax_policy(env, depth)))
  if spec.startswith("mcts"):
    name, sims = _split_arg(spec, 64, "simulations")
    if name != "mcts":
      raise ValueError(f"unknown opponent {spec!r}; valid: {', '.join(SPECS)}")
    if (env.num_players != 2 or env.payoff != "zero_sum"
        or env.num_chance_outcomes != 1):
      raise ValueError(
          f"opponent 'mcts' needs a deterministic two-player zero-sum game "
          f"(e.g. breakthrough); env {env.id!r} has {env.num_players} players, "
          f"payoff {env.payoff!r}, {env.num_chance_outcomes} chance outcomes")
    from envs import breakthrough_players  # pylint: disable=import-outside-toplevel
    return Opponent(f"mcts:{sims}", _from_state_key(
        breakthrough_players.mcts_policy(env, num_simulations=sims)))
  if spec == "greedy":
    if env.id != "carchess":
      raise ValueError(f"opponent 'greedy' is the carchess heuristic; env "
                       f"{env.id!r} has none")
    from envs import carchess_players  # pylint: disable=import-outside-toplevel
    return Opponent("greedy", _vmapped(carchess_players.make_policy(env, "greedy")))
  raise ValueError(f"unknown opponent {spec!r}; valid: {', '.join(SPECS)}")


def checkpoint_opponent(directory: str, step: Optional[int], env: envs.Env, *,
                        simulations: Optional[int] = None) -> Opponent:
  """A saved agent (greedy search) as an opponent in `env`'s game.

  Raises:
    CheckpointError: a missing or unreadable checkpoint, or one for another
      game or game version.
  """
  from anakin_mz import agent as agent_lib  # pylint: disable=import-outside-toplevel
  from anakin_mz import checkpoint as ckpt  # pylint: disable=import-outside-toplevel
  loaded = agent_lib.load_agent(directory, step, expect_env=env.id)
  if dict(loaded.env.params) != dict(env.params):
    raise ckpt.CheckpointError(
        f"checkpoint {directory!r} plays {env.id} with params "
        f"{dict(loaded.env.params)}, not {dict(env.params)}")
  search = loaded.config.search
  if simulations is not None:
    search = dataclasses.replace(search, num_simulations=int(simulations))
  policy = evaluation.search_agent_policy(loaded.network, loaded.params,
                                          loaded.env, search)
  return Opponent(f"ckpt:{directory}@{loaded.step}", policy, step=loaded.step)
