"""TensorBoard runs -> PNG figures (no TensorFlow: tensorboard's own
EventAccumulator reads the event files). `scripts/plot.py` is its command
line, and its doc lists the figures. Needs matplotlib (the `plot` extra).
"""

from __future__ import annotations

import collections
import glob
import os
import re
from typing import Dict, List, Optional, Tuple

import numpy as np

from anakin_mz.runtime import summary

Series = Tuple[np.ndarray, np.ndarray]  # (steps, values)


def find_runs(paths: List[str]) -> List[str]:
  """Run directories (holding event files) under `paths`.

  Raises:
    ValueError: a path that does not exist or holds no event files.
  """
  runs = []
  for path in paths:
    if not os.path.isdir(path):
      raise ValueError(f"run directory {path!r} does not exist")
    found = sorted(
      {
        os.path.dirname(f)
        for f in glob.glob(os.path.join(path, "**", "events.out.tfevents.*"), recursive=True)
      }
    )
    if not found:
      raise ValueError(f"no TensorBoard event files under {path!r}")
    runs += [f for f in found if f not in runs]
  return runs


def load_scalars(run: str) -> Dict[str, Series]:
  """{tag: (steps, values)} of every scalar in `run`, sorted by step (the
  last value wins where a step repeats, e.g. after --resume)."""
  from tensorboard.backend.event_processing import event_accumulator

  acc = event_accumulator.EventAccumulator(run, size_guidance={event_accumulator.SCALARS: 0})
  acc.Reload()
  out = {}
  for tag in acc.Tags().get("scalars", []):
    points = {e.step: e.value for e in acc.Scalars(tag)}
    steps = np.array(sorted(points), np.int64)
    out[tag] = (steps, np.array([points[s] for s in steps], np.float64))
  return out


def _label(run: str, runs: List[str]) -> str:
  if len(runs) == 1:
    return os.path.basename(os.path.normpath(run))
  common = os.path.commonpath(runs)
  return os.path.relpath(run, common) if run != common else os.path.basename(run)


# x axes other than the update step: (tag it is interpolated from, factor, label).
X_AXES = {
  "env_steps": (summary.ENV_STEPS, 1.0, "env steps"),
  "wall": (summary.WALL, 1 / 60, "wall-clock (minutes, compilation included)"),
}


def _x_values(scalars: Dict[str, Series], steps: np.ndarray, axis: str) -> Optional[np.ndarray]:
  """The `axis` (a key of X_AXES) at update `steps`, interpolated from its
  tag; None where the run did not log it.

  Update 0, the untrained agent the run loop evaluates before it trains, is
  0 on either axis where the run did not log the axis there (runs before the
  loop logged it, or ones without an untrained evaluation): the axes are
  logged from the first logged step on, and interpolating from them alone
  drew the untrained point at the first logged env step."""
  tag, factor, _ = X_AXES[axis]
  if tag not in scalars:
    return None
  s, v = scalars[tag]
  if len(s) and s[0] > 0:
    s, v = np.concatenate([[0], s]), np.concatenate([[0.0], v])
  return np.interp(steps, s, v) * factor


def curve(
  scalars: Dict[str, Series], tag: str, axis: Optional[str] = None
) -> Tuple[np.ndarray, np.ndarray, Optional[str]]:
  """(x, y, x label) of `tag` as a figure draws it: x its update steps, or
  where `axis` (a key of X_AXES) is given and logged, that axis at them
  (`_x_values`); the label None for the update steps."""
  x, y = scalars[tag]
  if axis is not None:
    values = _x_values(scalars, x, axis)
    if values is not None:
      return values, y, X_AXES[axis][2]
  return x, y, None


def _grid(n: int):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  cols = min(n, 3)
  rows = -(-n // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
  for ax in axes.flat[n:]:
    ax.axis("off")
  return plt, fig, list(axes.flat[:n])


def _save(plt, fig, path: str, written: List[str]) -> None:
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  written.append(path)


EVAL_PATTERN = re.compile(rf"^(eval/.*(score_mean|win_rate)|exact/.*|{re.escape(summary.RETURN)})$")
# anakin_mz.core.loss metrics as run.py logs them (train/<term>), plus any *loss*.
LOSS_PATTERN = re.compile(
  r"^(train/(.*loss.*|total|l2|reward|value|policy|chance|"
  r"identity|identity_accuracy|grad_norm)|loss/.*)$"
)
THROUGHPUT_PATTERN = re.compile(r"^throughput/.*$")
DYNAMICS_PATTERN = re.compile(r"^dynamics/(?P<metric>.+)_k(?P<k>\d+)$")
DYNAMICS_TITLES = {
  "top_move": "top-move dynamics test",
  "uniform": "uniform dynamics test",
  "top1": "top-1 move legal",
  "identity_turn": "identity accuracy: turn",
  "identity_chance": "identity accuracy: chance",
  "identity_terminal": "identity accuracy: terminal",
  "chance_tv": "chance head: total variation",
  "reward_mae": "reward |error|",
}


def _overlay(all_scalars, runs, pattern, path, xlabel, written, x_axis=None, logy=False) -> bool:
  tags = sorted({t for s in all_scalars for t in s if pattern.match(t)})
  if not tags:
    return False
  plt, fig, axes = _grid(len(tags))
  for ax, tag in zip(axes, tags):
    for run, scalars in zip(runs, all_scalars):
      if tag not in scalars:
        continue
      x, y, xlab = curve(scalars, tag, x_axis)
      label = _label(run, runs)
      ax.plot(x, y, marker="o" if len(x) < 30 else None, markersize=3, label=label)
      ax.set_xlabel(xlab or xlabel)
    ax.set_title(tag, fontsize=9)
    ax.grid(alpha=0.3)
    if logy and all(np.all(s[tag][1] > 0) for s in all_scalars if tag in s):
      ax.set_yscale("log")
    if len(runs) > 1:
      ax.legend(fontsize=7)
  _save(plt, fig, path, written)
  return True


def plot_dynamics(scalars: Dict[str, Series], path: str, title: str, written: List[str]) -> bool:
  """Figure 3 style: one panel per metric, one line per depth k."""
  by_metric: Dict[str, Dict[int, Series]] = collections.defaultdict(dict)
  for tag, series in scalars.items():
    m = DYNAMICS_PATTERN.match(tag)
    if m:
      by_metric[m["metric"]][int(m["k"])] = series
  if not by_metric:
    return False
  order = [m for m in DYNAMICS_TITLES if m in by_metric]
  order += sorted(set(by_metric) - set(order))
  plt, fig, axes = _grid(len(order))
  from matplotlib.ticker import EngFormatter

  cmap = plt.get_cmap("viridis")
  for ax, metric in zip(axes, order):
    depths = sorted(by_metric[metric])
    for k in depths:
      x, y = by_metric[metric][k]
      ax.plot(
        x,
        y,
        color=cmap(k / max(1, max(depths))),
        label=f"k={k}",
        marker="o" if len(x) < 30 else None,
        markersize=3,
      )
    ax.set_title(DYNAMICS_TITLES.get(metric, metric), fontsize=10)
    ax.set_xlabel("training step (updates)")
    # "50k", "100k": six-digit update counts in full ran into each other.
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    if metric not in ("chance_tv", "reward_mae"):
      ax.set_ylim(-0.02, 1.02)
      ax.set_ylabel("success rate")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
  fig.suptitle(title)
  _save(plt, fig, path, written)
  return True


def value_at(
  scalars: Dict[str, Series], tag: str, axis: str, x: float, window: float = 0.1
) -> Optional[float]:
  """Mean of `tag` over its logged points whose `axis` (a key of X_AXES)
  lies in [(1 - window) x, x]: a noisy curve (the self-play return of the
  episodes of one log interval) read at `x`, smoothed over the last
  `window` of the way there; where no point lies in the window (sparse
  evaluations), interpolated linearly between its neighbours. The untrained
  agent's point (update 0) is never in the mean, whatever the window: on a
  short run whose compilation is most of its wall-clock it would otherwise
  be. None where the run lacks the tag or the axis, or ends before `x`.
  The run's end is its axis's last point, not the tag's: the self-play
  return has no point in a log interval where no episode ended, often the
  last one (a run of 2M env steps whose return was last logged at 1.997M is
  read at 2M over its window). A tag whose last point is before the window
  is None there too, not extrapolated."""
  if tag not in scalars:
    return None
  steps, values = scalars[tag]
  xs = _x_values(scalars, steps, axis)
  if xs is None or not len(xs):
    return None
  axis_tag, factor, _ = X_AXES[axis]
  run_end = float(np.max(scalars[axis_tag][1])) * factor
  if run_end < x * (1 - 1e-6) or xs.max() < (1 - window) * x:
    return None
  finite = np.isfinite(values)
  keep = (xs >= (1 - window) * x) & (xs <= x * (1 + 1e-6)) & finite & (steps > 0)
  if keep.any():
    return float(np.mean(values[keep]))
  # A sparse curve (periodic evaluations) with no point in the window:
  # linear interpolation between the points either side of `x`.
  return float(np.interp(x, xs[finite], values[finite])) if finite.any() else None


def learning_table(runs: List[str], all_scalars, window: float = 0.1) -> str:
  """A Markdown table: each run's score tags (EVAL_PATTERN) at the common
  env-step horizon and the common wall-clock horizon (the smallest final
  value over the runs, so every run is read at the same budget), each the
  mean over the last `window` of the way (`value_at`); '' if none."""
  tags = sorted({t for s in all_scalars for t in s if EVAL_PATTERN.match(t)})
  ends = {}
  for axis in X_AXES:
    finals = []
    for scalars in all_scalars:
      present = [t for t in tags if t in scalars]
      xs = [_x_values(scalars, scalars[t][0], axis) for t in present]
      xs = [x.max() for x in xs if x is not None and len(x)]
      if xs:
        finals.append(max(xs))
    if finals and len(finals) == len(all_scalars):
      ends[axis] = min(finals)
  if not tags or not ends:
    return ""
  head = ["run"]
  cols = []
  for tag in tags:
    for axis, x in ends.items():
      at = f"{x:,.0f} env steps" if axis == "env_steps" else f"{x:.1f} min"
      head.append(f"{tag} at {at}")
      cols.append((tag, axis, x))
  lines = [
    f"Each figure: the mean of the logged points over the last {window:.0%} of the way to the "
    "budget (the smallest final budget over the runs, so all are read at the same point).",
    "",
    "| " + " | ".join(head) + " |",
    "|" + " --- |" * len(head),
  ]
  for run, scalars in zip(runs, all_scalars):
    cells = [_label(run, runs)]
    for tag, axis, x in cols:
      v = value_at(scalars, tag, axis, x, window)
      cells.append("-" if v is None else f"{v:.3f}")
    lines.append("| " + " | ".join(cells) + " |")
  return "\n".join(lines) + "\n"


def make_plots(paths: List[str], out: Optional[str] = None) -> List[str]:
  """Writes every figure it has data for, and learning.md (`learning_table`);
  returns their paths."""
  runs = find_runs(paths)
  out = out or os.path.join(paths[0], "plots")
  try:
    os.makedirs(out, exist_ok=True)
  except OSError as e:
    raise ValueError(f"cannot create output directory {out!r}: {e}") from None
  all_scalars = [load_scalars(r) for r in runs]
  written: List[str] = []
  _overlay(
    all_scalars,
    runs,
    EVAL_PATTERN,
    os.path.join(out, "learning.png"),
    "training step (updates)",
    written,
    x_axis="env_steps",
  )
  _overlay(
    all_scalars,
    runs,
    EVAL_PATTERN,
    os.path.join(out, "learning_wallclock.png"),
    "training step (updates)",
    written,
    x_axis="wall",
  )
  _overlay(
    all_scalars,
    runs,
    LOSS_PATTERN,
    os.path.join(out, "losses.png"),
    "training step (updates)",
    written,
    logy=True,
  )
  _overlay(
    all_scalars,
    runs,
    THROUGHPUT_PATTERN,
    os.path.join(out, "throughput.png"),
    "training step (updates)",
    written,
  )
  table = learning_table(runs, all_scalars)
  if table:
    path = os.path.join(out, "learning.md")
    with open(path, "w") as f:
      f.write(table)
    written.append(path)
  for run, scalars in zip(runs, all_scalars):
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", _label(run, runs)) or "run"
    plot_dynamics(
      scalars,
      os.path.join(out, f"dynamics_{name}.png"),
      f"dynamics tests: {_label(run, runs)}",
      written,
    )
  return written
