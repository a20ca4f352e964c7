"""A spec's target (a bar to reach) and its report.

A spec (`anakin_mz.experiments.spec`) may carry a target: the value its
figure, `evaluation.measure`, must reach (>=), and where that bar comes from:

    evaluation: {games: 1000, measure: exact.greedy_vs_optimal}
    target: {value: 0.49, source: "0.50 is perfect play"}

Each run's record then holds the bar (`evaluation.target`), and
`anakin-mz experiment run` ends with the report of the planned runs, drawn
from their records (`report`): one row per variant and seed with the
figure, its 95 % interval, the bar and whether it was met, then the
commands and where the bars come from. The project's bars are the specs
`docs/results/experiments/strength_*.yaml` (one per game's bar, its
ablations as variants; all named `strength`, so their records are the
strength tables').
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import os

from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments import tables

_KEYS = ("value", "source")


@dataclasses.dataclass(frozen=True)
class Target:
  """A bar: the spec's `evaluation.measure` must reach `value` (>=);
  `source` says where the bar comes from (shown in the report)."""

  value: float
  source: str = ""


def parse(raw: object, where: str) -> Target:
  """The target of a spec's `target:` mapping `{value, source}`.

  Raises:
    ValueError: not a mapping, an unknown key, no value or a value that is
      not a number (naming `where` and what is valid).
  """
  if not isinstance(raw, Mapping):
    raise ValueError(f"{where}: target must be a mapping {{value, source}}, got {raw!r}")
  unknown = sorted(set(raw) - set(_KEYS))
  if unknown:
    raise ValueError(f"{where}: target: unknown key(s) {unknown}; valid: {', '.join(_KEYS)}")
  value = raw.get("value")
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    raise ValueError(f"{where}: target: value must be a number (the bar to reach), got {value!r}")
  return Target(float(value), str(raw.get("source") or ""))


@dataclasses.dataclass(frozen=True)
class Row:
  """One run's figure against the bar, read from its record."""

  variant: str
  seed: int
  measure: str
  figure: records_lib.Figure
  target: float
  record: records_lib.RunRecord

  @property
  def met(self) -> bool:
    return self.figure.value >= self.target


def rows(
  recs: Sequence[records_lib.RunRecord],
  experiment: str,
  pairs: Sequence[Tuple[str, int]],
  measure: str,
  target: Target,
  model: Optional[str] = None,
) -> Tuple[List[Row], List[Tuple[str, int]]]:
  """(the rows of the (variant, seed) `pairs` that have a record of
  `experiment` (and `model`) in `recs`, the last one of each; the pairs
  that have none), both in the order of `pairs`.

  Raises:
    ValueError: a record without the figure `measure` (naming those it has).
  """
  latest: Dict[Tuple[str, Optional[int]], records_lib.RunRecord] = {}
  for r in recs:
    if r.experiment == experiment and r.evaluation.get("model") == model:
      latest[(r.variant, r.seed)] = r
  out, missing = [], []
  for variant, seed in pairs:
    r = latest.get((variant, seed))
    if r is None:
      missing.append((variant, seed))
      continue
    figure = r.figures.get(measure)
    if figure is None:
      raise ValueError(
        f"the record of {variant} seed {seed} has no figure {measure!r}; "
        f"it has {', '.join(r.figures) or 'none'}"
      )
    out.append(Row(variant, seed, measure, figure, target.value, r))
  return out, missing


def markdown(
  rows: Sequence[Row],
  *,
  missing: Sequence[Tuple[str, int]] = (),
  sources: Mapping[str, str] = {},
) -> str:
  """The report: one row per run, the runs `missing` listed as not run, the
  commands, and `sources` (a name -> where its bar comes from)."""
  head = ["bar", "seed", "opponent", "measure", "score", "95% interval", "bar to reach", "met"]
  head += ["updates", "train wall-clock"]
  cells = []
  for r in rows:
    f, budget = r.figure, r.record.budget
    cells.append(
      [
        r.variant,
        str(r.seed),
        str(r.record.evaluation.get("opponent") or "(plays every seat)"),
        f"`{r.measure}`",
        f"{f.value:.3f}",
        "exact" if f.exact else f"[{f.low:.3f}, {f.high:.3f}]",
        f">= {r.target:g}",
        "yes" if r.met else "**no**",
        str(budget.updates),
        "-" if budget.train_minutes is None else f"{budget.train_minutes:.1f} min",
      ]
    )
  lines = [tables.grid(head, cells)]
  if missing:
    lines += ["", "Not run yet: " + ", ".join(f"{v} seed {s}" for v, s in missing) + "."]
  lines += ["", "Commands:", ""]
  lines += [f"- {r.variant}, seed {r.seed}: `{r.record.command}`" for r in rows]
  sources = {k: v for k, v in sources.items() if v}
  if sources:
    lines += ["", "Where the bars come from:", ""]
    lines += [f"- {name}: {src}" for name, src in sources.items()]
  return "\n".join(lines) + "\n"


def report(
  path: str,
  experiment: str,
  pairs: Sequence[Tuple[str, int]],
  measure: str,
  target: Target,
  *,
  model: Optional[str] = None,
  sources: Mapping[str, str] = {},
) -> str:
  """The report (`markdown`) of the (variant, seed) `pairs` from the records
  file `path` (absent: every pair not run yet); `sources` of the variants
  with a row."""
  recs = records_lib.read(path) if os.path.exists(path) else []
  got, missing = rows(recs, experiment, pairs, measure, target, model)
  shown = {r.variant for r in got}
  return markdown(got, missing=missing, sources={k: v for k, v in sources.items() if k in shown})
