"""What a training run prints of its evaluations: one short line per
evaluation (`eval_line`) and a short table at the end (`final_table`), each
of the evaluation's headline metrics (`headline`). The full result of an
evaluation (the match's spread and rates, the dynamics tests, ...) goes to
TensorBoard, and with `anakin-mz train --json FILE` to that file.
"""

from __future__ import annotations

from typing import Dict, Mapping

import envs.bots

# The match against uniform random that every evaluation plays (`periodic.evaluate`).
SCORE = "eval/vs_random_score_mean"
WIN_RATE = "eval/vs_random_win_rate"  # shown for zero-sum games only


def headline(result: Mapping[str, float], env) -> Dict[str, float]:
  """The metrics of an evaluation `result` (`periodic.evaluate`'s keys) that say
  most of `env`'s agent: the score against random (and its win rate in a
  zero-sum game), then every score of the game's own evaluators
  (`envs.bots.evaluators`: e.g. exact win probabilities), in `result`'s
  order. Those a result lacks are left out."""
  keys = [SCORE] + ([WIN_RATE] if env.payoff == "zero_sum" else [])
  prefixes = tuple(f"{e.name}/" for e in envs.bots.evaluators(env.id))
  keys += [k for k in result if prefixes and k.startswith(prefixes)]
  return {k: float(result[k]) for k in keys if k in result}


def _value(key: str, value: float) -> str:
  # The game's evaluators are exact to the 4th decimal (0.4909 vs 0.4911);
  # the match's figures are sample means of a few hundred games.
  if key == SCORE:
    return f"{value:+.3f}"
  return f"{value:.3f}" if key.startswith("eval/") else f"{value:.4f}"


def eval_line(result: Mapping[str, float], env) -> str:
  """One short line of an evaluation `result` that holds `update_step`,
  `env_steps` and `wall_s`: where it was made and its `headline`."""
  head = headline(result, env)
  parts = [
    f"[eval] update {int(result['update_step'])}",
    f"env steps {result['env_steps']:,.0f}",
    f"wall {result['wall_s']:.0f}s",
  ]
  if SCORE in head:
    score = f"{'vs random' if env.num_players > 1 else 'score'} {_value(SCORE, head[SCORE])}"
    if WIN_RATE in head:
      score += f" (win {_value(WIN_RATE, head[WIN_RATE])})"
    parts.append(score)
  by_group: Dict[str, list] = {}
  for key, value in head.items():
    if key not in (SCORE, WIN_RATE):
      group, _, name = key.partition("/")
      by_group.setdefault(group, []).append(f"{name} {_value(key, value)}")
  parts += [f"{group}: {', '.join(items)}" for group, items in by_group.items()]
  return "  ".join(parts)


def final_table(result: Mapping[str, float], env, where: str = "TensorBoard") -> str:
  """A few aligned lines for the end of a run: where its last evaluation
  `result` was made, each `headline` metric under its TensorBoard tag, and
  how many more metrics `where` (e.g. "TensorBoard and eval.json") holds."""
  head = headline(result, env)
  lines = [
    f"final evaluation: update {int(result['update_step'])}, "
    f"{result['env_steps']:,.0f} env steps, {result['wall_s'] / 60:.1f} min"
  ]
  width = max((len(k) for k in head), default=0)
  lines += [f"  {k:<{width}}  {_value(k, v):>7}" for k, v in head.items()]
  others = sum(1 for k in result if "/" in k) - len(head)
  if others:
    lines.append(f"  ({others} more metrics in {where})")
  return "\n".join(lines)
