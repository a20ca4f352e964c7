"""A spec's optional schedule: its runs trained in rounds with a scoring
between them (the NDMZ paper's Figures 2 and 3), run by `anakin-mz
experiment run` like any spec (`spec.run` hands a scheduled spec here).

    schedule:
      games: 30000          # each run's budget: games, env_steps or minutes (one)
      every: 1500           # scored at the start and every this many
      first: 0              # optional: the first scored point (later: trained to unscored)
      score: paper          # run (default: the training loop's evaluation) or paper
      opponents: [optimal, random]    # paper: the bots its search plays
      exact: [greedy, search, value]  # paper: the policies the exact evaluators score
    evaluation: {games: 1000}         # match games per score (even; default 500)

A scheduled spec takes no `budget` (the schedule is it), `checkpoint` or
`target`. Its runs are the spec driver's run directories,
`<runs>/<name>/<variant>_s<seed>`, each trained in chunks by `compare`
(the engine: resumable to the step, a signal-stopped run scored where it
stopped with `score_now`); each scored point is a run record in the
spec's records file (default `<runs>/<name>/records.jsonl`), and
`<runs>/<name>/compare.md` with its figures is the report, drawn after each
round. A variant `[agent=NAME, ...]` is compare's `--agents NAME:...`, so
`anakin-mz compare` (which builds this spec) finds the same directories.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shlex
from typing import Callable, List, Mapping, Optional, Sequence, Tuple

from anakin_mz.experiments.compare_records import BUDGET_UNITS

KEYS = (*BUDGET_UNITS, "every", "first", "score", "opponents", "exact")
SCORES = ("run", "paper")
# A scheduled spec's evaluation: the match games of each score.
EVAL_KEYS = ("games",)
EVAL_GAMES = 500


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


def run_specs(
  spec, variants: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None
):
  """The engine's runs (`compare.RunSpec`) of the spec's planned (variant,
  seed) runs: a variant whose first override is `agent=NAME` is compare's
  agent NAME with the rest; any other is its config's agent with all of
  them. A run is named by its variant unless that is compare's own label."""
  from anakin_mz import config as config_lib
  from anakin_mz.experiments import compare, spec as spec_lib

  out = []
  for variant, seed in spec_lib.plan(spec, variants, seeds):
    over = list(variant.overrides)
    if over and over[0].startswith("agent="):
      agent, over = over[0][len("agent=") :], over[1:]
    else:
      agent = config_lib.load_for_env(spec.env, spec.config, [*spec.overrides, *over])[0].agent
    run = compare.RunSpec(agent, seed, tuple(over))
    if run.label != f"{variant.name}_s{seed}":
      run = dataclasses.replace(run, name=variant.name)
    out.append(run)
  return out


def describe(spec, runs: str, records: str, variants=None, seeds=None) -> List[str]:
  """What `run` would do (`experiment run --dry-run`): the schedule, each
  run's directory, the records file."""
  s = spec.schedule
  b = s.budget
  head = f"schedule: {b.total:g} {b.unit}, scored every {b.every:g}"
  head += f" from {b.first:g}" if b.first else " from the start"
  head += f", scoring {s.score}" + (f" vs {','.join(s.opponents)}" if s.score == "paper" else "")
  where = os.path.join(runs, spec.name)
  lines = [head] + [os.path.join(where, r.label) for r in run_specs(spec, variants, seeds)]
  return lines + [f"records: {records}", f"report: {os.path.join(where, 'compare.md')}"]


def run_command(spec, runs: str) -> Callable[[object], str]:
  """The command a scored point's record names: the `experiment run` of its
  variant and seed."""
  from anakin_mz.experiments import records as records_lib

  path = records_lib.repo_path(spec.path) if os.path.isabs(spec.path) else spec.path
  base = f"anakin-mz experiment run {shlex.quote(path)} --runs={shlex.quote(runs or '.')}"
  return lambda s: f"{base} --variants={s.label[: -len(f'_s{s.seed}')]} --seeds {s.seed}"


def run(
  spec,
  runs: str,
  *,
  records: str,
  variants: Optional[Sequence[str]] = None,
  seeds: Optional[Sequence[int]] = None,
  log: Callable[[str], None] = print,
  score_now: bool = False,
  command: Optional[Callable[[object], str]] = None,
  title: Optional[str] = None,
  reevaluate: bool = False,
) -> list:
  """Trains and scores the planned runs of scheduled `spec` on its schedule
  (`compare.compare`, in `<runs>/<name>`), appending a record per scored
  point to `records`; returns those records. `command`: a point's record's
  command for its run (default `run_command`; for a spec of no file, the one
  `anakin-mz compare` builds, compare's own); `title`: the report's
  (default: the game and the variants).

  Raises:
    ValueError: as `compare.compare`; `reevaluate` (a point is scored once).
  """
  from anakin_mz import config as config_lib
  from anakin_mz.experiments import compare

  if reevaluate:
    raise ValueError(f"spec {spec.path!r} has a schedule: its points are not evaluated again")

  s = spec.schedule
  base, path, overrides = config_lib.load_for_env(spec.env, spec.config, list(spec.overrides))
  listed = run_specs(spec)  # every run of the spec: its comparison's settings
  chosen = [r.label for r in run_specs(spec, variants, seeds)]
  scoring = None if s.score == "run" else compare.PaperScoring(s.opponents, s.exact)
  if title is None:
    names = ",".join(v.name for v in spec.variants)
    seeds_all = " ".join(map(str, sorted({r.seed for r in listed})))
    title = f"{base.env} {dict(base.env_params)}: {names}, seeds {seeds_all}"
  new: list = []
  compare.compare(
    path,
    overrides,
    listed,
    s.budget,
    os.path.join(runs, spec.name),
    eval_games=int(spec.evaluation.get("games", EVAL_GAMES)),
    title=title,
    scoring=scoring,
    score_now=score_now,
    say=log,
    train=chosen,
    records=records,
    command=command or (run_command(spec, runs) if spec.path else None),
    on_record=new.append,
  )
  return new
