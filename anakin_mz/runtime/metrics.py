"""What a training step reports (`StepMetrics`).

Every learner's `local_step` returns a `StepMetrics` (replicated over the
devices); the run loop turns it into one row of host floats (`row`), whose
keys are TensorBoard tags or become them (`summary.tag`).
"""

from __future__ import annotations

from typing import Dict, Optional

import chex
import jax.numpy as jnp
import numpy as np

from anakin_mz.runtime.summary import (
  ENV_STEPS_PER_S,
  EPISODE_LENGTH,
  RETURN,
  SEARCH_SIMS_PER_S,
  UPDATES_PER_S,
)


@chex.dataclass(frozen=True)
class SearchStats:
  """Self-play's search in one step (agents that search only).

  Attributes:
    searches: int32 `[]` lane-searches run.
    decisions_per_search: `[]` decision steps per search.
    temperature: `[]` the self-play move temperature.
  """

  searches: chex.Array
  decisions_per_search: chex.Array
  temperature: chex.Array


@chex.dataclass(frozen=True)
class StepMetrics:
  """One training step, summed over every lane and device (counts) or
  averaged over its updates (the learner's terms).

  Attributes:
    episodes: int32 `[]` games that ended in the step.
    return_sum: `[P]` their returns, summed.
    length_sum: int32 `[]` their lengths (transitions), summed.
    decision_steps: int32 `[]` transitions at decision nodes.
    transitions: int32 `[]` all transitions played.
    updates_applied: int32 `[]` updates the step applied (0 before the
      replay is ready, or where the NaN guard held it back).
    terms: the learner's own scalars `{name: []}` (loss terms, `loss`,
      `grad_norm`, ...), each under `train/<name>`.
    nonfinite: `{name: bool []}`: a checked value (a term, or `params`)
      went non-finite in the step, which was then not applied
      (`guard.finite_check`).
    nonfinite_update: int32 `[]`, the step's first update with a non-finite
      value (-1 if none).
    search: `SearchStats`, or None for an agent that does not search.
  """

  episodes: chex.Array
  return_sum: chex.Array
  length_sum: chex.Array
  decision_steps: chex.Array
  transitions: chex.Array
  updates_applied: chex.Array
  terms: Dict[str, chex.Array]
  nonfinite: Dict[str, chex.Array]
  nonfinite_update: chex.Array
  search: Optional[SearchStats] = None


def search_stats(searches: chex.Array, decision_steps: chex.Array, temperature) -> SearchStats:
  """`SearchStats` of a step with `searches` lane-searches."""
  return SearchStats(
    searches=searches,
    decisions_per_search=decision_steps / jnp.maximum(searches, 1),
    temperature=temperature,
  )


def row(metrics: StepMetrics, seconds: float, simulations: int) -> Dict[str, float]:
  """The run loop's row of one step's host `metrics`, taken in `seconds`,
  with `simulations` per search: the terms and counts, the self-play means
  (where a game ended) and the throughputs."""
  out = {k: float(np.mean(v)) for k, v in metrics.terms.items()}
  for name in ("episodes", "length_sum", "decision_steps", "transitions", "updates_applied"):
    out[name] = float(getattr(metrics, name))
  stats = metrics.search
  if stats is not None:
    out.update(
      searches=float(stats.searches),
      decisions_per_search=float(stats.decisions_per_search),
      temperature=float(stats.temperature),
    )
  if metrics.episodes > 0:
    out[RETURN] = float(metrics.return_sum[0] / metrics.episodes)
    out[EPISODE_LENGTH] = float(metrics.length_sum / metrics.episodes)
  out[ENV_STEPS_PER_S] = float(metrics.transitions) / seconds
  if stats is not None:
    out[SEARCH_SIMS_PER_S] = float(stats.searches) * simulations / seconds
  out[UPDATES_PER_S] = float(metrics.updates_applied) / seconds
  return out
