"""A spec with a schedule (`schedule`), run: its runs trained in rounds by
`compare` (the engine) and scored between them. `spec.run` hands a
scheduled spec here, with the (variant, seed) runs it planned.

Its runs are the spec driver's run directories,
`<runs>/<name>/<variant>_s<seed>`, each trained in chunks by `compare`
(resumable to the step, a signal-stopped run scored where it stopped with
`score_now`); each scored point is a run record in the spec's records file
(default `<runs>/<name>/records.jsonl`), and `<runs>/<name>/compare.md`
with its figures is the report, drawn after each round. A variant
`[agent=NAME, ...]` is compare's `--agents NAME:...`, so `anakin-mz
compare` (which builds this spec) finds the same directories.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from typing import Callable, List, Optional, Sequence, Tuple

from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments.schedule import EVAL_GAMES, RunSpec


def run_specs(spec, pairs: Optional[Sequence[Tuple[object, int]]] = None) -> List[RunSpec]:
  """The engine's runs (`RunSpec`) of the spec's planned (variant, seed)
  runs `pairs` (`spec.plan`'s; default: every variant's seeds): a variant
  whose first override is `agent=NAME` is compare's agent NAME with the
  rest; any other is its config's agent with all of them. A run is named by
  its variant unless that is compare's own label."""
  from anakin_mz import config as config_lib

  if pairs is None:
    pairs = [(v, s) for v in spec.variants for s in v.seeds]
  out = []
  for variant, seed in pairs:
    over = list(variant.overrides)
    if over and over[0].startswith("agent="):
      agent, over = over[0][len("agent=") :], over[1:]
    else:
      agent = config_lib.load_for_env(spec.env, spec.config, [*spec.overrides, *over])[0].agent
    run = RunSpec(agent, seed, tuple(over))
    if run.label != f"{variant.name}_s{seed}":
      run = dataclasses.replace(run, name=variant.name)
    out.append(run)
  return out


def describe(spec, runs: str, records: str, pairs=None) -> List[str]:
  """What `run` would do (`experiment run --dry-run`): the schedule, the
  directory of each of the runs `pairs` (`run_specs`'), the records file."""
  s = spec.schedule
  b = s.budget
  head = f"schedule: {b.total:g} {b.unit}, scored every {b.every:g}"
  head += f" from {b.first:g}" if b.first else " from the start"
  head += f", scoring {s.score}" + (f" vs {','.join(s.opponents)}" if s.score == "paper" else "")
  where = os.path.join(runs, spec.name)
  lines = [head] + [os.path.join(where, r.label) for r in run_specs(spec, pairs)]
  return lines + [f"records: {records}", f"report: {os.path.join(where, 'compare.md')}"]


def run_command(spec, runs: str) -> Callable[[object], str]:
  """The command a scored point's record names: the `experiment run` of its
  variant and seed."""
  path = records_lib.repo_path(spec.path) if os.path.isabs(spec.path) else spec.path
  base = f"anakin-mz experiment run {shlex.quote(path)} --runs={shlex.quote(runs or '.')}"
  return lambda s: f"{base} --variants={s.label[: -len(f'_s{s.seed}')]} --seeds {s.seed}"


def run(
  spec,
  runs: str,
  *,
  records: str,
  pairs: Optional[Sequence[Tuple[object, int]]] = None,
  log: Callable[[str], None] = print,
  score_now: bool = False,
  command: Optional[Callable[[object], str]] = None,
  title: Optional[str] = None,
  reevaluate: bool = False,
) -> list:
  """Trains and scores the planned runs `pairs` (`run_specs`') of scheduled
  `spec` on its schedule (`compare.compare`, in `<runs>/<name>`), appending
  a record per scored point to `records`; returns those records. `command`: a point's record's
  command for its run (default `run_command`; for a spec of no file, the one
  `anakin-mz compare` builds, compare's own); `title`: the report's
  (default: the game and the variants).

  Raises:
    ValueError: as `compare.compare`; `reevaluate` (a point is scored once).
  """
  from anakin_mz import config as config_lib
  from anakin_mz.experiments import compare  # JAX's import: a run's only

  if reevaluate:
    raise ValueError(f"spec {spec.path!r} has a schedule: its points are not evaluated again")

  s = spec.schedule
  base, path, overrides = config_lib.load_for_env(spec.env, spec.config, list(spec.overrides))
  listed = run_specs(spec)  # every run of the spec: its comparison's settings
  chosen = [r.label for r in run_specs(spec, pairs)]
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
