"""A run's learning curve as a run record: one TensorBoard tag (by default the
self-play return) read at chosen points of the env-step (or wall-clock) axis,
smoothed as `eval.plots.value_at` reads a curve, for runs whose figure is
their training curve and that run no evaluation (MinAtar's MuZero against
PPO). `anakin-mz experiment curve` is its command.

A figure is named `<tag>@<point>`, the point written short: `10M`, `300k`,
`1.5M` (env steps), or `<minutes>min` on the wall-clock axis; e.g.
`selfplay/return_p0@10M`, which a table reads as `{fig[selfplay/return_p0@10M]:.2f}`.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from anakin_mz.eval import plots
from anakin_mz.experiments import records as records_lib
from anakin_mz.runtime import summary

AXES = tuple(plots.X_AXES)  # env_steps, wall


def point_name(x: float, axis: str = "env_steps") -> str:
  """The short name of a point of `axis`: 1e7 -> '10M', 3e5 -> '300k',
  1.5e6 -> '1.5M'; on the wall-clock axis (minutes) 30 -> '30min'."""
  if axis == "wall":
    return f"{x:g}min"
  for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
    if abs(x) >= scale:
      return f"{x / scale:g}{suffix}"
  return f"{x:g}"


def figure_name(tag: str, x: float, axis: str = "env_steps") -> str:
  return f"{tag}@{point_name(x, axis)}"


def _last(scalars: Dict[str, plots.Series], tag: str) -> Optional[float]:
  if tag not in scalars or not len(scalars[tag][1]):
    return None
  return float(scalars[tag][1][-1])


def curve_record(
  run: str,
  *,
  experiment: str,
  variant: str,
  seed: Optional[int],
  command: Optional[str],
  at: Sequence[float],
  tag: str = summary.RETURN,
  axis: str = "env_steps",
  window: float = 0.1,
  note: str = "",
  device: object = records_lib.HERE,
  commit: object = records_lib.HERE,
  date: object = records_lib.HERE,
) -> records_lib.RunRecord:
  """The record of the TensorBoard run under `run` (a directory holding one
  run's event files): `tag` at each point of `at` on `axis` (env steps, or
  minutes of wall-clock for 'wall'), the mean of its logged values over the
  last `window` of the way there (`plots.value_at`); the budget is what the
  run made (its last update step, env steps and wall-clock minutes).

  Raises ValueError where the run has no events, lacks `tag` or the axis,
  ends before a point, or an argument is out of range, naming it."""
  if axis not in AXES:
    raise ValueError(f"unknown axis {axis!r}; valid: {', '.join(AXES)}")
  if not at:
    raise ValueError("give at least one point to read the curve at")
  if any(not np.isfinite(x) or x <= 0 for x in at):
    raise ValueError(f"points must be finite and > 0, got {list(at)}")
  if not 0 < window <= 1:
    raise ValueError(f"window must be in (0, 1], got {window}")
  found = plots.find_runs([run])
  if len(found) != 1:
    raise ValueError(f"{run!r} holds {len(found)} TensorBoard runs ({', '.join(found)}); give one")
  scalars = plots.load_scalars(found[0])
  if tag not in scalars:
    raise ValueError(f"{run!r} has no tag {tag!r}; its tags: {', '.join(sorted(scalars))}")
  axis_tag = plots.X_AXES[axis][0]
  if axis_tag not in scalars:
    raise ValueError(f"{run!r} has no {axis_tag!r}, the {axis} axis")
  figures = {}
  for x in at:
    value = plots.value_at(scalars, tag, axis, float(x), window)
    if value is None:
      end = _last(scalars, axis_tag) * plots.X_AXES[axis][1]
      raise ValueError(
        f"{run!r} ends at {point_name(end, axis)} {axis}, before {point_name(x, axis)}"
      )
    figures[figure_name(tag, x, axis)] = records_lib.Figure(value)
  steps = scalars[tag][0]
  env_steps, wall = _last(scalars, summary.ENV_STEPS), _last(scalars, summary.WALL)
  budget = records_lib.Budget(
    updates=int(steps[-1]),
    env_steps=env_steps,
    train_minutes=None if wall is None else wall / 60,
  )
  evaluation = {"curve": tag, "axis": axis, "at": [float(x) for x in at], "window": window}
  return records_lib.new(
    experiment,
    variant,
    seed,
    command=command,
    budget=budget,
    evaluation=evaluation,
    figures=figures,
    note=note,
    device=device,
    commit=commit,
    date=date,
  )
