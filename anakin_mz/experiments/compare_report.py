"""The report of a comparison (`anakin_mz.experiments.compare`): its
Markdown tables at equal env steps, games or wall-clock, the NDMZ paper's
Figures 2 and 3 as PNG files, and the reference scores beside them. Drawn
from the runs' rows (`compare.jsonl`) only.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional

import numpy as np

from anakin_mz import config as config_lib
from anakin_mz.experiments import tables
from anakin_mz.experiments.schedule import Budget

# The NDMZ paper's round: 300 self-play games, then training (section 4.2).
# A games budget's tables and Figure 2 count rounds of it, whatever
# `--every` scores.
ROUND_GAMES = 300

# The paper's two dynamics tests (Figure 3).
FIGURE3_METRICS = ("top_move", "uniform")

# Agents the paper draws as a flat line across Figure 2, not as a curve over
# rounds: TD(lambda), "the average results of a trained TD-Lambda agent"
# (Figure 2's caption; trained to its plateau), is a reference level for the
# searching agents, and its own rounds would stretch the rounds axis far
# past theirs.
FLAT_AGENTS = ("tdlambda",)

# ---------------------------------------------------------------- report ----


def _is_headline(key: str) -> bool:
  """Win rates worth a column: the exact evaluators' and the match's."""
  if key.startswith("dynamics/"):
    return False
  return key.endswith("win_rate") or bool(re.search(r"_vs_[A-Za-z0-9]+$", key))


def score_keys(rows: Dict[str, List[Dict[str, object]]]) -> List[str]:
  """The headline scores present, exact evaluators first."""
  keys = sorted({k for rs in rows.values() for r in rs for k in r if _is_headline(k)})
  return sorted(keys, key=lambda k: (k.startswith("eval/"), k))


def flat_lines(
  rows: Dict[str, List[Dict[str, object]]],
  key: str,
  reference: Optional[Dict[str, float]] = None,
) -> Dict[str, float]:
  """The level at which each run of a `FLAT_AGENTS` agent is drawn for
  `key`: the mean of its scored points in the second half of its training
  (by update step; a trained agent's average, the paper's line, with less
  of one match's noise than its last point); {run label: level}, runs
  without `key` left out, and none for the game's `reference` scores (no
  agent's level)."""
  out: Dict[str, float] = {}
  if _short(key) in (reference or {}):
    return out
  for label, rs in rows.items():
    pts = [r for r in rs if key in r]
    if pts and str(pts[0]["agent"]) in FLAT_AGENTS:
      half = float(pts[-1]["update_step"]) / 2
      out[label] = float(np.mean([r[key] for r in pts if float(r["update_step"]) >= half]))
  return out


def _interp(rows, x_key: str, y_key: str, x: float) -> Optional[float]:
  xs = np.array([r[x_key] for r in rows if y_key in r], np.float64)
  ys = np.array([r[y_key] for r in rows if y_key in r], np.float64)
  if len(xs) == 0 or x > xs[-1] + 1e-9 or x < xs[0] - 1e-9:
    return None
  return float(np.interp(x, xs, ys))


def _short(key: str) -> str:
  return key.split("/", 1)[-1]


def column_names(keys: List[str]) -> Dict[str, str]:
  """Each score key's column name: the key without its evaluator's prefix
  ("exact/", "match/", "eval/"), unless another key would then share the
  name (`--score paper` has the search's exact score and its match against
  the same opponent): those keep the whole key."""
  shorts = [_short(k) for k in keys]
  return {k: s if shorts.count(s) == 1 else k for k, s in zip(keys, shorts)}


def markdown(
  rows: Dict[str, List[Dict[str, object]]],
  budget: Budget,
  title: str = "",
  reference: Optional[Dict[str, float]] = None,
) -> str:
  """The comparison as Markdown: the last scored point of each run, then
  the scores at equal env steps and at equal wall-clock (linear
  interpolation between scored points; an empty cell is past that run's
  last point), by round for a games budget, and the `flat_lines` levels
  (not of the game's `reference` scores, which no agent plays)."""
  keys = score_keys(rows)
  dyn = sorted(
    {k for rs in rows.values() for r in rs for k in r if k.startswith("dynamics/")},
    key=_dyn_order,
  )
  dyn = [k for k in dyn if _dyn_metric(k) in FIGURE3_METRICS]
  lines = [f"## {title}", ""] if title else []
  names = column_names(keys)
  head = ["run", "agent", "seed", "updates", "env steps", "train min"] + [names[k] for k in keys]
  last = []
  for label, rs in rows.items():
    if not rs:
      continue
    r = rs[-1]
    cells = [label, str(r["agent"]), str(r["seed"]), str(r["update_step"])]
    cells += [f"{r['env_steps']:.0f}", f"{r['train_s'] / 60:.1f}"]
    last.append(cells + [f"{r[k]:.4f}" if k in r else "" for k in keys])
  lines.append(tables.grid(head, last))
  for x_key, name, fmt, xs in (
    ("env_steps", "env steps", "{:.0f}", _grid(rows, "env_steps", 1.0)),
    ("train_s", "train minutes", "{:.1f}", _grid(rows, "train_s", 1 / 60)),
  ):
    for k in keys[:2]:  # the exact scores (the first two) at equal budget
      lines += ["", f"{names[k]} at equal {name}:", ""]
      labels = [label for label, rs in rows.items() if rs]
      at = []
      for x in xs:
        cells = [fmt.format(x / 60 if x_key == "train_s" else x)]
        for label in labels:
          v = _interp(rows[label], x_key, k, x)
          cells.append("" if v is None else f"{v:.4f}")
        at.append(cells)
      lines.append(tables.grid([name] + labels, at))
  if budget.unit == "games":
    lines += _by_round(rows, keys, ROUND_GAMES)
  flat = [(label, k, v) for k in keys for label, v in flat_lines(rows, k, reference).items()]
  if flat:
    head = "drawn as flat lines in Figure 2 (each run's mean over the second half of its training):"
    lines += ["", head, ""]
    lines += [f"- {label} {names[k]}: {v:.4f}" for label, k, v in flat]
  if dyn:
    lines += ["", "dynamics tests at the last scored point (success rate by depth k):", ""]
    head = ["run"] + [_short(k) for k in dyn]
    cells = [
      [label] + [f"{rs[-1].get(k, float('nan')):.3f}" for k in dyn]
      for label, rs in rows.items()
      if rs and any(k in rs[-1] for k in dyn)
    ]
    lines.append(tables.grid(head, cells))
  return "\n".join(lines) + "\n"


def _by_round(rows, keys: List[str], every: float) -> List[str]:
  """Each score at each scored round (`every` games a round; a point is
  scored when the step that reached its games ends, so a round's games run
  a few over), a match's score with its 95 % interval."""
  labels = [label for label, rs in rows.items() if rs]
  names = column_names(keys)
  lines: List[str] = []
  for k in keys:
    lines += ["", f"{names[k]} by round ({every:g} self-play games each):", ""]
    by = {label: {round(r.get("games", 0.0) / every): r for r in rows[label]} for label in labels}
    at = []
    for n in sorted({n for b in by.values() for n in b}):
      cells = [str(n)]
      for label in labels:
        r = by[label].get(n)
        if r is None or k not in r:
          cells.append("")
        elif k + "_low" in r:
          cells.append(f"{r[k]:.3f} [{r[k + '_low']:.3f}, {r[k + '_high']:.3f}]")
        else:
          cells.append(f"{r[k]:.4f}")
      at.append(cells)
    lines.append(tables.grid(["round"] + labels, at))
  return lines


def _grid(rows, x_key: str, scale: float, points: int = 6) -> List[float]:
  """`points` evenly spaced x values up to the smallest final x over runs
  (where every run has a score), from 0."""
  ends = [rs[-1][x_key] for rs in rows.values() if rs]
  if not ends or min(ends) <= 0:
    return [0.0]
  end = min(ends)
  return [end * i / (points - 1) for i in range(points)]


def _dyn_metric(key: str) -> str:
  m = re.match(r"dynamics/(.+)_k(\d+)$", key)
  return m[1] if m else ""


def _dyn_order(key: str):
  m = re.match(r"dynamics/(.+)_k(\d+)$", key)
  return (m[1], int(m[2])) if m else (key, 0)


def figures(
  rows: Dict[str, List[Dict[str, object]]],
  out: str,
  reference: Optional[Dict[str, float]] = None,
  round_games: Optional[float] = None,
) -> List[str]:
  """Figure 2 style (`figure2.png`: each exact score against env steps and
  against training minutes, and against rounds of `round_games` self-play
  games where given, one line per run, one colour per agent; a match's
  score with its Wilson band; a `FLAT_AGENTS` run as a dashed level, its
  trained average, `flat_lines`) and
  Figure 3 style (`figure3_<run>.png`: the two dynamics tests against the
  training step, one line per depth, via `plots.plot_dynamics`). Needs
  matplotlib. Returns the paths written."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  from anakin_mz.eval import plots

  written: List[str] = []
  keys = score_keys(rows)
  if keys:
    agents = sorted({str(r["agent"]) for rs in rows.values() for r in rs})
    # One colour per agent; its runs (seeds, variants) differ by line style.
    same_agent: Dict[str, int] = {}
    for label, rs in rows.items():
      if rs:
        agent = str(rs[0]["agent"])
        same_agent[label] = sum(
          1 for other in same_agent if other != label and str(rows[other][0]["agent"]) == agent
        )
    colours = {a: plt.get_cmap("tab10")(i % 10) for i, a in enumerate(agents)}
    styles = ["-", "--", ":", "-."]
    x_axes = [("env_steps", "env steps", 1.0), ("train_s", "training wall-clock (minutes)", 1 / 60)]
    if round_games:
      x_axes.insert(0, ("games", f"rounds ({round_games:g} self-play games each)", 1 / round_games))
    fig, axes = plt.subplots(
      len(x_axes), len(keys), figsize=(4.8 * len(keys), 3.5 * len(x_axes)), squeeze=False
    )
    for col, k in enumerate(keys):
      flat = flat_lines(rows, k, reference)
      for row_i, (x_key, xlabel, scale) in enumerate(x_axes):
        ax = axes[row_i, col]
        for label, rs in rows.items():
          pts = [r for r in rs if k in r and x_key in r]
          if not pts:
            continue
          if label in flat:
            ax.axhline(
              flat[label],
              color=colours[str(pts[0]["agent"])],
              linestyle="--",
              linewidth=1.2,
              label=f"{label}, trained ({flat[label]:.3f})",
            )
            continue
          if k + "_low" in pts[0]:  # a sampled score: its 95 % interval as a band
            ax.fill_between(
              [r[x_key] * scale for r in pts],
              [r[k + "_low"] for r in pts],
              [r[k + "_high"] for r in pts],
              color=colours[str(pts[0]["agent"])],
              alpha=0.12,
            )
          ax.plot(
            [r[x_key] * scale for r in pts],
            [r[k] for r in pts],
            color=colours[str(pts[0]["agent"])],
            linestyle=styles[same_agent[label] % len(styles)],
            marker="o",
            markersize=3,
            label=label,
          )
        name = _short(k)
        ref = (reference or {}).get(name.replace("greedy_", "optimal_", 1))
        if name.endswith("_vs_optimal"):
          ax.axhline(0.5, color="grey", linestyle=":", linewidth=1, label="optimal (0.5)")
        elif ref is not None:
          ax.axhline(ref, color="grey", linestyle=":", linewidth=1, label=f"optimal ({ref:.3f})")
        ax.set_title(k, fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("win probability")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(
      f"win rate against {'rounds, ' if round_games else ''}env steps and wall-clock "
      "(Figure 2 style)"
    )
    fig.tight_layout()
    path = os.path.join(out, "figure2.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
  for label, rs in rows.items():
    scalars = {}
    tags = {k for r in rs for k in r if _dyn_metric(k) in FIGURE3_METRICS}
    for tag in tags:
      pts = [r for r in rs if tag in r]
      scalars[tag] = (
        np.array([r["update_step"] for r in pts]),
        np.array([r[tag] for r in pts], np.float64),
      )
    plots.plot_dynamics(
      scalars,
      os.path.join(out, f"figure3_{label}.png"),
      f"dynamics tests: {label} (Figure 3 style)",
      written,
    )
  return written


def references(config: config_lib.Config) -> Dict[str, float]:
  """The game's reference scores (`envs.bots` evaluators), e.g. Nannon's
  `optimal_vs_random`."""
  import envs.bots

  env = config.make_env()
  out: Dict[str, float] = {}
  for evaluator in envs.bots.evaluators(env.id):
    out.update(evaluator.reference(env))
  return out


def write_report(
  out: str,
  rows: Dict[str, List[Dict[str, object]]],
  budget: Budget,
  reference: Optional[Dict[str, float]] = None,
  title: str = "",
) -> List[str]:
  """`<out>/compare.md` (the tables, the reference scores, the figures'
  links) and the figures; returns the paths written."""
  written = figures(rows, out, reference, ROUND_GAMES if budget.unit == "games" else None)
  text = markdown(rows, budget, title, reference)
  if reference:
    text += "\nreference: " + ", ".join(f"{k} {v:.4f}" for k, v in reference.items()) + "\n"
  text += "".join(f"\n![{os.path.basename(p)}]({os.path.basename(p)})\n" for p in written)
  path = os.path.join(out, "compare.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return [path] + written
