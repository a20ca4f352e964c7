"""A spec's optional schedule: its runs trained in rounds with a scoring
between them (the NDMZ paper's Figures 2 and 3), run by `anakin-mz
experiment run` like any spec (`spec.run` hands a scheduled spec to
`schedule_run.run`). This module is the section as data and its parser;
`schedule_run` runs it.

    schedule:
      games: 30000          # each run's budget: games, env_steps or minutes (one)
      every: 1500           # scored at the start and every this many
      first: 0              # optional: the first scored point (later: trained to unscored)
      score: paper          # run (default: the training loop's evaluation) or paper
      opponents: [optimal, random]    # paper: the bots its search plays
      exact: [greedy, search, value]  # paper: the policies the exact evaluators score
    evaluation: {games: 1000}         # match games per score (even; default 500)

A scheduled spec takes no `budget` (the schedule is it), `checkpoint` or
`target`. Its runs (`RunSpec`, the engine's: an agent, overrides, a seed)
are the spec driver's run directories, `<runs>/<name>/<variant>_s<seed>`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Dict, List, Mapping, Optional, Tuple

# What a schedule's budget can count (`Budget.unit`).
BUDGET_UNITS = ("env_steps", "minutes", "games")
KEYS = (*BUDGET_UNITS, "every", "first", "score", "opponents", "exact")
SCORES = ("run", "paper")
# A scheduled spec's evaluation: the match games of each score.
EVAL_KEYS = ("games",)
EVAL_GAMES = 500


def budget_flag(unit: str) -> str:
  """The command-line option that gives a budget in `unit`: `--env-steps`."""
  return "--" + unit.replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Budget:
  """What every run gets: `total` env steps, minutes or self-play games
  (`unit`), scored every `every` of the same unit (and at the start). With
  games, `every` is the NDMZ paper's round (300 games): each run trains
  until its games reach the next point, to the step (`run.train`'s `stop`)."""

  unit: str  # one of BUDGET_UNITS
  total: float
  every: float
  # The first scored point: 0 scores the untrained agent; a later one trains
  # to it unscored (a run that repeats known early points skips their cost).
  first: float = 0.0

  def __post_init__(self):
    if self.unit not in BUDGET_UNITS:
      raise ValueError(f"budget unit must be one of {BUDGET_UNITS}, got {self.unit!r}")
    if not self.total > 0:
      raise ValueError(f"the budget must be > 0, got {self.total}")
    if not 0 < self.every <= self.total:
      raise ValueError(
        f"the schedule interval must be in (0, budget={self.total}], got {self.every}"
      )
    if not 0 <= self.first <= self.total:
      raise ValueError(
        f"the first scored point must be in [0, budget={self.total}], got {self.first}"
      )

  def points(self) -> List[float]:
    """The schedule after the first point: every, 2 every, ..., total (the
    last point is total), those past `first`."""
    n = math.ceil(self.total / self.every - 1e-9)
    return [p for p in (min(self.total, self.every * (i + 1)) for i in range(n)) if p > self.first]


@dataclasses.dataclass(frozen=True)
class Schedule:
  """A spec's `schedule:` (the module doc): the budget and its points, and
  how each point is scored."""

  budget: Budget
  score: str = "run"
  opponents: Tuple[str, ...] = ("optimal", "random")
  exact: Tuple[str, ...] = ("greedy", "search", "value")


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run of a schedule (the engine's, `compare`'s): an agent, its extra
  overrides and a seed; `name`, a spec's variant, where it is not the
  label's."""

  agent: str
  seed: int
  overrides: Tuple[str, ...] = ()
  name: Optional[str] = None

  @property
  def label(self) -> str:
    """The run's directory name: `<name>_s<seed>`, by default
    `<agent>[_<overrides>]_s<seed>`."""
    if self.name is not None:
      return f"{self.name}_s{self.seed}"
    extra = "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", o) for o in self.overrides)
    return f"{self.agent}{'_' + extra if extra else ''}_s{self.seed}"

  def entry(self) -> Dict[str, object]:
    """The run as `compare.json` lists it (`name` only where given)."""
    out = dataclasses.asdict(self)
    if self.name is None:
      del out["name"]
    return out


def parse(raw: object, where: str) -> Schedule:
  """The schedule of a spec's `schedule:` mapping.

  Raises:
    ValueError: not a mapping, an unknown key, no budget or two, a bad
      number, score or list (naming `where` and what is valid).
  """
  where = f"{where}: schedule"
  if not isinstance(raw, Mapping):
    raise ValueError(f"{where} must be a mapping of {', '.join(KEYS)}, got {raw!r}")
  unknown = sorted(set(raw) - set(KEYS))
  if unknown:
    raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {', '.join(KEYS)}")
  units = [u for u in BUDGET_UNITS if u in raw]
  if len(units) != 1:
    raise ValueError(
      f"{where} needs one budget, {', '.join(BUDGET_UNITS[:-1])} or {BUDGET_UNITS[-1]} "
      f"(each run's), got {units or 'none'}"
    )
  if "every" not in raw:
    raise ValueError(f"{where} needs every: score every this many {units[0]}")

  def number(key, default=None) -> float:  # 30000, 3e4 or 30_000
    from anakin_mz import config as config_lib

    value = config_lib.parse_number(raw.get(key, default))
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
      raise ValueError(f"{where}: {key} must be a number, got {raw.get(key)!r}")
    return float(value)

  total, every, first = number(units[0]), number("every"), number("first", 0.0)
  try:
    budget = Budget(units[0], total, every, first)
  except ValueError as e:
    raise ValueError(f"{where}: {e}") from None
  score = raw.get("score", "run")
  if score not in SCORES:
    raise ValueError(f"{where}: score must be one of {', '.join(SCORES)}, got {score!r}")
  lists = {}
  for key in ("opponents", "exact"):
    if key not in raw:
      continue
    if score != "paper":
      raise ValueError(f"{where}: {key} is the paper scoring's (score: paper)")
    value = raw[key]
    if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
      raise ValueError(f"{where}: {key} must be a list of names, got {value!r}")
    lists[key] = tuple(value)
  if score == "paper":
    from anakin_mz.eval.report import EXTRA_POLICIES

    if not lists.get("opponents", True):
      raise ValueError(f"{where}: opponents: the paper's scoring needs at least one bot")
    bad = [p for p in lists.get("exact", ()) if p not in EXTRA_POLICIES]
    if bad:
      raise ValueError(f"{where}: exact {bad} unknown; valid: {', '.join(EXTRA_POLICIES)}")
  return Schedule(budget, score, **lists)


def check_spec(spec) -> None:
  """Raises ValueError where a scheduled spec has what a schedule replaces
  or cannot use: a budget, a checkpoint, a target, evaluation keys other
  than `EVAL_KEYS`, odd or too few match games."""
  where = f"spec {spec.path!r}"
  if spec.minutes is not None or spec.updates is not None:
    raise ValueError(f"{where}: a scheduled spec's budget is its schedule: no budget")
  if spec.checkpoint is not None or spec.target is not None:
    raise ValueError(f"{where}: a scheduled spec trains and scores its runs: no checkpoint, target")
  bad = sorted(set(spec.evaluation) - set(EVAL_KEYS))
  if bad:
    raise ValueError(
      f"{where}: a scheduled spec's evaluation takes {', '.join(EVAL_KEYS)} (match games "
      f"per score), got {bad}"
    )
  games = spec.evaluation.get("games", EVAL_GAMES)
  if not isinstance(games, int) or games < 2 or games % 2:
    raise ValueError(f"{where}: evaluation games must be an even number >= 2, got {games!r}")
