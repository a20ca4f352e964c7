"""Nannon's bot (`optimal`, the solver's player) and its exact evaluator:
win probabilities of any policy against the optimal and the random player,
by policy evaluation on the solved game (`envs.nannon_solver`), with no
sampling noise. Each policy's move in every decision (position, roll) is
computed in batches, all called with one fixed PRNG key."""

from __future__ import annotations

from typing import Dict, Mapping

import jax

from envs import nannon_solver
from envs.bots import Bot, Evaluator, register_bot, register_evaluator
from envs.core import Env
from envs.policy import OnePlyPolicy, Policy, per_game

TABLE_BATCH = 4096  # decision states per policy call (one on-device loop over all)


def policy_table(env: Env, policy: Policy, key: jax.Array) -> "nannon_solver.np.ndarray":
  """int8 `[N, d]`: `policy`'s move in every decision (position, roll), each
  batch called with `key`; -1 where there is no decision. An
  `envs.OnePlyPolicy` is tabulated from one value per position
  (`nannon_solver.one_ply_table`: the same table, minutes instead of hours
  for 12-5-6)."""
  if isinstance(policy, OnePlyPolicy):
    return nannon_solver.one_ply_table(env, policy, batch_size=TABLE_BATCH)
  act = jax.jit(lambda states: policy(states, key))
  return nannon_solver.policy_table_from_fn(env, act, batch_size=TABLE_BATCH)


def exact_scores(env: Env, policies: Mapping[str, Policy], key: jax.Array) -> Dict[str, float]:
  """`{name}_vs_optimal` and `{name}_vs_random`: the exact win probability
  of each named policy (averaged over seats and the opening roll)."""
  out = {}
  for name, policy in policies.items():
    table = policy_table(env, policy, key)
    for opponent in ("optimal", "random"):
      out[f"{name}_vs_{opponent}"] = nannon_solver.exact_win_probability(
        table, opponent, env
      ).win_probability
  return out


def reference(env: Env) -> Dict[str, float]:
  """The optimal player's exact win probability against random."""
  return {
    "optimal_vs_random": nannon_solver.exact_win_probability(
      nannon_solver.solve(env).policy, "random", env
    ).win_probability
  }


def format_exact(e: Mapping[str, float]) -> str:
  lines = ["exact win probability (nannon solver)   vs optimal   vs random"]
  labels = {
    "greedy": "greedy network policy",
    "search": "search policy table",
    "value": "value head, expectimax on the game",
    "model_1ply": "learned model, 1 ply (afterstate)",
    "model_chance": "learned model, 1 ply + chance",
    "true_tree": "h and f in the true-model tree",
  }
  names = [k[: -len("_vs_optimal")] for k in e if k.endswith("_vs_optimal")]
  for name in names:
    lines.append(
      f"  {labels.get(name, name):38}{e[f'{name}_vs_optimal']:.4f}"
      f"       {e[f'{name}_vs_random']:.4f}"
    )
  if "optimal_vs_random" in e:
    lines.append(f"  (optimal player: 0.5000 vs optimal, {e['optimal_vs_random']:.4f} vs random)")
  return "\n".join(lines)


register_bot(
  Bot(
    "optimal",
    lambda env: per_game(nannon_solver.optimal_policy(env)),
    games=("nannon",),
    needs="a game with an exact solver",
  )
)
register_evaluator(
  Evaluator(
    "exact", games=("nannon",), score=exact_scores, reference=reference, format=format_exact
  )
)
