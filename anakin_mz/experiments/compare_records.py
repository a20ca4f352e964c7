"""A comparison's scored points as run records, and back: `record` writes
one point's record (with the command that reruns its run), and
`rows_from_records` turns committed records into the report's rows, so a
comparison's tables and figures can be drawn without its run directories."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments.schedule import BUDGET_UNITS, RunSpec, budget_flag


def record(
  out,
  s: RunSpec,
  row,
  spec,
  config,
  *,
  commit: object = records_lib.HERE,
  command: Optional[str] = None,
) -> records_lib.RunRecord:
  """The run record of one scored point; its command reruns the whole run
  (default: the `anakin-mz compare` of it). `commit`: the code that trained
  it (default: the checkout's now)."""
  b = spec["budget"]
  args = ["anakin-mz compare", f"--env={config.env}", f"--config={spec['config']}"]
  args += [f"--agents={':'.join((s.agent,) + s.overrides)}", f"--seeds={s.seed}"]
  args += [f"{budget_flag(b['unit'])}={b['total']:g}", f"--every={b['every']:g}"]
  if b.get("first"):
    args.append(f"--score-from={b['first']:g}")
  args += [f"--eval-games={spec['eval_games']}", f"--out={out}"]
  scoring = spec.get("scoring")
  if scoring is not None:
    args += ["--score=paper", f"--score-opponents={','.join(scoring['opponents'])}"]
    args += [f"--exact={','.join(scoring['exact'])}"]
  args += list(spec["overrides"])
  scores = {k: v for k, v in row.items() if "/" in k and not k.endswith(("_low", "_high"))}
  return records_lib.new(
    os.path.basename(os.path.normpath(out)),
    s.label[: -len(f"_s{s.seed}")],
    s.seed,
    command=" ".join(args) if command is None else command,
    overrides=list(spec["overrides"]) + list(s.overrides),
    budget=records_lib.Budget(
      minutes=b["total"] if b["unit"] == "minutes" else None,
      updates=int(row["update_step"]),
      env_steps=float(row["env_steps"]),
      train_minutes=row["train_s"] / 60,
    ),
    evaluation={"games": spec["eval_games"], "agent": s.agent, "games_played": row.get("games")},
    commit=commit,
    figures={  # a match's Wilson interval (`score_paper`) as its figure's low and high
      k: records_lib.Figure(float(v), row.get(k + "_low"), row.get(k + "_high"))
      for k, v in scores.items()
    },
  )


def rows_from_records(
  records: Sequence[records_lib.RunRecord], experiment: str
) -> Dict[str, List[Dict[str, object]]]:
  """The report's rows ({label: rows}, `<variant>_s<seed>`, by update step)
  of the scored points of `experiment` among `records` (`record`'s
  inverse): a comparison's figures and tables drawn again from its committed
  records, without its run directories. A run is its command: the points of
  one command form one line (a run resumed elsewhere included), and a point's
  updates appear once (the later record wins); a second command of the same
  variant and seed (the run repeated, e.g. with another schedule) is a line
  of its own, `<variant>_s<seed>_run2`. A command that differs only in its
  budget total or in how its `--out` is spelled is the same run (`_run_of`).

  Raises:
    ValueError: no record of `experiment` (the message lists those there).
  """
  mine = [r for r in records if r.experiment == experiment]
  if not mine:
    there = sorted({r.experiment for r in records})
    raise ValueError(f"no records of experiment {experiment!r}; there: {', '.join(there)}")
  by: Dict[str, Dict[int, Dict[str, object]]] = {}
  runs: Dict[Tuple[str, Optional[int]], List[Optional[str]]] = {}
  for r in mine:
    commands = runs.setdefault((r.variant, r.seed), [])
    run = _run_of(r.command)
    if run not in commands:
      commands.append(run)
    n = commands.index(run)
    label = f"{r.variant}_s{r.seed}" + (f"_run{n + 1}" if n else "")
    row: Dict[str, object] = {
      "label": label,
      "agent": str(r.evaluation.get("agent", r.variant)),
      "seed": r.seed,
      "update_step": int(r.budget.updates or 0),
      "env_steps": float(r.budget.env_steps or 0.0),
      "games": float(r.evaluation.get("games_played") or 0.0),
      "train_s": 60.0 * float(r.budget.train_minutes or 0.0),
    }
    for k, f in r.figures.items():
      row[k] = f.value
      if f.low is not None and f.high is not None:
        row[k + "_low"], row[k + "_high"] = f.low, f.high
    by.setdefault(label, {})[row["update_step"]] = row
  return {label: [pts[u] for u in sorted(pts)] for label, pts in by.items()}


_TOTALS = tuple(budget_flag(u) + "=" for u in BUDGET_UNITS)


def _run_of(command: Optional[str]) -> Optional[str]:
  """The run a point's command trained: the command without its budget total,
  with `--out` reduced to its last name. One `--out` holds one comparison
  (`compare` refuses other settings there), and a larger total only extends
  it; so a run resumed to a larger budget, or from another directory
  (`runs/x` and `/work/runs/x`), is one run. Absolute paths are read as the
  repository root's (`records.repo_command`): a record from before paths
  were relative reads as one written after."""
  if command is None:
    return None
  words = []
  for w in records_lib.repo_command(command).split():
    if w.startswith(_TOTALS):
      continue
    if w.startswith("--out="):
      w = "--out=" + os.path.basename(os.path.normpath(w[len("--out=") :]))
    words.append(w)
  return " ".join(words)
