"""Run records: one JSON line per run (or per scored point of a run), the one
format every experiment writes and every results table is generated from.

A record says what ran (experiment, variant, seed, the exact command and its
overrides), what it spent (`Budget`: the wall-clock limit, and the updates,
env steps and training minutes it made), how it was evaluated (`evaluation`:
the settings, e.g. opponent, games, evaluation seed, the measure and the
value to reach) and what that gave (`figures`: a value with its 95 %
interval where it was sampled, the value alone where it is exact), where
(`device`), from which code (`commit`) and when (`date`).

`source` says where a record comes from: "run" (written by the tool that ran
it: `anakin-mz experiment run`, `strength`, `compare`), "converted" (read
once from an older result file in git, named by `origin`) or "transcribed"
(a row of a hand-written table whose runs are not in git, copied once from
the document and commit named by `origin`; its `cells` are the row's cells
as the table gave them).

Every field is present in every line (null where unknown), so a line with a
field missing is an error, naming the file and the line, not a silent gap in
a table. `anakin_mz.experiments.tables` renders records into tables.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import re
import subprocess
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

SOURCES = ("run", "converted", "transcribed")


class RecordError(ValueError):
  """A records file that cannot be read: names the file and the line."""


@dataclasses.dataclass(frozen=True)
class Figure:
  """One evaluation figure: `value`, and its 95 % interval [low, high] where
  it was sampled (a match); both None where it is exact."""

  value: float
  low: Optional[float] = None
  high: Optional[float] = None

  @property
  def exact(self) -> bool:
    return self.low is None and self.high is None


@dataclasses.dataclass(frozen=True)
class Budget:
  """What a run was given and what it spent.

  Attributes:
    minutes: the wall-clock limit it was given (`--minutes`), if any.
    updates: gradient updates it made.
    env_steps: env transitions it made.
    train_minutes: its training wall-clock, as measured.
  """

  minutes: Optional[float] = None
  updates: Optional[int] = None
  env_steps: Optional[float] = None
  train_minutes: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """One run (or one scored point of a run); see the module doc."""

  experiment: str
  variant: str
  seed: Optional[int]
  command: Optional[str]
  overrides: Tuple[str, ...]
  budget: Budget
  evaluation: Mapping[str, object]
  figures: Mapping[str, Figure]
  device: Optional[str]
  commit: Optional[str]
  date: Optional[str]
  source: str
  origin: Optional[str]
  note: str
  cells: Optional[Tuple[str, ...]]

  @property
  def transcribed(self) -> bool:
    return self.source == "transcribed"


FIELDS = tuple(f.name for f in dataclasses.fields(RunRecord))
BUDGET_FIELDS = tuple(f.name for f in dataclasses.fields(Budget))


def to_dict(record: RunRecord) -> Dict[str, object]:
  """The record as its JSON object (fields in their order)."""
  out: Dict[str, object] = {}
  for name in FIELDS:
    value = getattr(record, name)
    if name == "budget":
      value = dataclasses.asdict(value)
    elif name == "figures":
      value = {k: dataclasses.asdict(f) for k, f in value.items()}
    elif name in ("overrides", "cells") and value is not None:
      value = list(value)
    elif name == "evaluation":
      value = dict(value)
    out[name] = value
  return out


def to_line(record: RunRecord) -> str:
  return json.dumps(to_dict(record), ensure_ascii=False)


def _check_keys(obj: Mapping[str, object], want: Sequence[str], what: str) -> None:
  missing = [k for k in want if k not in obj]
  if missing:
    raise ValueError(f"{what} lacks field(s) {missing} (every field is required, null if unknown)")
  unknown = sorted(set(obj) - set(want))
  if unknown:
    raise ValueError(f"{what} has unknown field(s) {unknown}; valid: {', '.join(want)}")


def _opt(value, kind, name: str):
  if value is None:
    return None
  if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
    return float(value)
  if kind is int and isinstance(value, int) and not isinstance(value, bool):
    return value
  if kind is str and isinstance(value, str):
    return value
  what = {int: "an integer", float: "a number", str: "a string"}[kind]
  raise ValueError(f"field {name!r} must be {what} or null, got {value!r}")


def _figure(name: str, raw: object) -> Figure:
  if not isinstance(raw, Mapping):
    raise ValueError(f"figure {name!r} must be an object {{value, low, high}}, got {raw!r}")
  _check_keys(raw, ("value", "low", "high"), f"figure {name!r}")
  value = _opt(raw["value"], float, f"figures.{name}.value")
  if value is None:
    raise ValueError(f"figure {name!r} has no value")
  low = _opt(raw["low"], float, f"figures.{name}.low")
  high = _opt(raw["high"], float, f"figures.{name}.high")
  if (low is None) != (high is None):
    raise ValueError(f"figure {name!r}: give both low and high, or neither (exact)")
  return Figure(value, low, high)


def from_dict(raw: object) -> RunRecord:
  """A record from its JSON object.

  Raises:
    ValueError: a missing or unknown field, or a value of the wrong type.
  """
  if not isinstance(raw, Mapping):
    raise ValueError(f"a record must be a JSON object, got {type(raw).__name__}")
  _check_keys(raw, FIELDS, "the record")
  budget = raw["budget"]
  if not isinstance(budget, Mapping):
    raise ValueError(f"field 'budget' must be an object, got {budget!r}")
  _check_keys(budget, BUDGET_FIELDS, "the record's budget")
  figures = raw["figures"]
  if not isinstance(figures, Mapping):
    raise ValueError(f"field 'figures' must be an object, got {figures!r}")
  evaluation = raw["evaluation"]
  if not isinstance(evaluation, Mapping):
    raise ValueError(f"field 'evaluation' must be an object, got {evaluation!r}")
  for name in ("overrides",) + (("cells",) if raw["cells"] is not None else ()):
    items = raw[name]
    if not isinstance(items, list) or not all(isinstance(o, str) for o in items):
      raise ValueError(f"field {name!r} must be a list of strings, got {items!r}")
  source = raw["source"]
  if source not in SOURCES:
    raise ValueError(f"field 'source' must be one of {', '.join(SOURCES)}, got {source!r}")
  for name in ("experiment", "variant", "note"):
    if not isinstance(raw[name], str):
      raise ValueError(f"field {name!r} must be a string, got {raw[name]!r}")
  return RunRecord(
    experiment=raw["experiment"],
    variant=raw["variant"],
    seed=_opt(raw["seed"], int, "seed"),
    command=_opt(raw["command"], str, "command"),
    overrides=tuple(raw["overrides"]),
    budget=Budget(
      minutes=_opt(budget["minutes"], float, "budget.minutes"),
      updates=_opt(budget["updates"], int, "budget.updates"),
      env_steps=_opt(budget["env_steps"], float, "budget.env_steps"),
      train_minutes=_opt(budget["train_minutes"], float, "budget.train_minutes"),
    ),
    evaluation=dict(evaluation),
    figures={str(k): _figure(str(k), v) for k, v in figures.items()},
    device=_opt(raw["device"], str, "device"),
    commit=_opt(raw["commit"], str, "commit"),
    date=_opt(raw["date"], str, "date"),
    source=source,
    origin=_opt(raw["origin"], str, "origin"),
    note=raw["note"],
    cells=None if raw["cells"] is None else tuple(raw["cells"]),
  )


def read(path: str) -> List[RunRecord]:
  """The records of a JSON-lines file, in order (blank lines skipped).

  Raises:
    RecordError: the file cannot be read, or a line is not a valid record
      (the message names the file and the line).
  """
  try:
    with open(path, encoding="utf-8") as f:
      lines = f.readlines()
  except OSError as e:
    raise RecordError(f"cannot read records file {path!r}: {e.strerror}") from None
  out = []
  for number, line in enumerate(lines, 1):
    if not line.strip():
      continue
    try:
      raw = json.loads(line)
    except json.JSONDecodeError as e:
      raise RecordError(
        f"{path}:{number}: not JSON ({e.msg}); a run killed while writing it? "
        "delete the line and run again"
      ) from None
    try:
      out.append(from_dict(raw))
    except ValueError as e:
      raise RecordError(f"{path}:{number}: {e}") from None
  return out


def append(path: str, record: RunRecord) -> None:
  """Appends one record to `path` (created, with its directory, if absent)."""
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "a", encoding="utf-8") as f:
    f.write(to_line(record) + "\n")
    f.flush()
    os.fsync(f.fileno())


def write(path: str, records: Iterable[RunRecord]) -> None:
  """Writes `records` to `path`, replacing it (atomically)."""
  _replace(path, "".join(to_line(r) + "\n" for r in records))


def write_json(path: str, obj: object, indent: Optional[int] = None) -> None:
  """Writes `obj` as JSON to `path`, replacing it (atomically: a process
  killed while writing leaves the old file, never half of the new)."""
  _replace(path, json.dumps(obj, indent=indent))


def _replace(path: str, text: str) -> None:
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(tmp, path)


# ------------------------------------------------------- what runs write ----


def figures_of(result: Mapping[str, object]) -> Dict[str, Figure]:
  """The figures of an evaluation result (`report.evaluate_checkpoint`, or a
  `strength.json`'s evaluation), named by their dotted path: `score` (the
  mean score with its 95 % interval), `wdl.win`, `wdl.draw`, `wdl.loss`,
  `wdl.points` (Wilson intervals), `exact.<name>` (exact numbers) and, for
  an evaluation pooled over checkpoints, `checkpoints.<i>.score` (each
  step's, oldest first)."""
  out: Dict[str, Figure] = {}
  score = result.get("score")
  if isinstance(score, Mapping) and "mean" in score:
    out["score"] = Figure(float(score["mean"]), _f(score.get("low")), _f(score.get("high")))
  wdl = result.get("wdl")
  if isinstance(wdl, Mapping):
    for name in ("win", "draw", "loss", "points"):
      d = wdl.get(name)
      if isinstance(d, Mapping):
        value = d["rate"] if "rate" in d else d["mean"]
        out[f"wdl.{name}"] = Figure(float(value), _f(d.get("low")), _f(d.get("high")))
  # A pooled evaluation (`report.evaluate_last_checkpoints`): each step's own
  # score beside the pooled one, oldest first.
  for i, c in enumerate(result.get("checkpoints") or ()):
    s = c["score"]
    out[f"checkpoints.{i}.score"] = Figure(float(s["mean"]), _f(s.get("low")), _f(s.get("high")))
  exact = result.get("exact")
  if isinstance(exact, Mapping):
    for name, value in exact.items():
      if isinstance(value, (int, float)):
        out[f"exact.{name}"] = Figure(float(value))
  return out


def repo_root() -> str:
  """The folder records' paths are relative to: the checkout this package
  was imported from (the folder of `anakin_mz/` and pyproject.toml),
  whatever the working directory; the working directory where the package
  is installed (no checkout)."""
  here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  return here if os.path.exists(os.path.join(here, "pyproject.toml")) else os.getcwd()


def repo_path(path: str, root: Optional[str] = None) -> str:
  """`path` (absolute, or relative to the working directory) as a record
  writes it: relative to `root` (default `repo_root`), `../runs/x` for a
  folder beside it. A path that shares no folder with the root (`/tmp/x`
  against `/work/main`) stays absolute: no relative spelling of it would
  hold on another machine either."""
  root = os.path.abspath(root or repo_root())
  path = os.path.abspath(path)
  if os.path.commonpath([root, path]) == os.sep:
    return path
  return os.path.relpath(path, root)


# An absolute path in a command: a word, or the value of `--flag=`, that
# starts with "/" (after a space, "=", a quote, or at the start).
_ABSOLUTE = re.compile(r"(?<![^\s='\"])/[^\s'\";&|)]*")


def repo_command(command: Optional[str], root: Optional[str] = None) -> Optional[str]:
  """`command` with each absolute path in it written by `repo_path`
  (relative to `root`, default `repo_root`); relative paths, which are the
  root's already, stay as they are."""
  if command is None:
    return None
  root = root or repo_root()
  return _ABSOLUTE.sub(lambda m: repo_path(m.group(0), root), command)


def _f(x) -> Optional[float]:
  return None if x is None else float(x)


def device_note() -> str:
  """Where this process runs: the JAX backend and devices, the host's cores
  and those this process may use (`taskset`)."""
  import jax

  from anakin_mz.runtime import host

  devices = jax.devices()
  kind = devices[0].device_kind if devices else "?"
  return (
    f"{jax.default_backend()}: {len(devices)} x {kind}; "
    f"host {os.cpu_count()} cores, {host.usable_cores()} usable"
  )


def git_commit(where: Optional[str] = None) -> Optional[str]:
  """The commit (short) of the checkout at `where`, by default the one this
  package was imported from (the code that runs, whatever the working
  directory), `-dirty` where tracked files differ from it; None outside a
  git checkout (an installed wheel)."""
  where = where or os.path.dirname(os.path.abspath(__file__))
  try:
    head = subprocess.run(
      ["git", "rev-parse", "--short", "HEAD"], cwd=where, capture_output=True, text=True
    )
    if head.returncode != 0:
      return None
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=where, capture_output=True)
  except OSError:
    return None
  return head.stdout.strip() + ("-dirty" if dirty.returncode == 1 else "")


def today() -> str:
  return datetime.date.today().isoformat()


HERE = object()  # `new`: this process's device, commit or date


def new(
  experiment: str,
  variant: str,
  seed: Optional[int],
  *,
  command: Optional[str],
  overrides: Sequence[str] = (),
  budget: Budget = Budget(),
  evaluation: Optional[Mapping[str, object]] = None,
  figures: Optional[Mapping[str, Figure]] = None,
  note: str = "",
  device: object = HERE,
  commit: object = HERE,
  date: object = HERE,
) -> RunRecord:
  """A record of a run (`source` "run"); the device, commit and date are
  this process's unless given (None: unknown). The command's absolute paths
  are written relative to the repository root (`repo_command`)."""
  return RunRecord(
    experiment=experiment,
    variant=variant,
    seed=seed,
    command=repo_command(command),
    overrides=tuple(overrides),
    budget=budget,
    evaluation=dict(evaluation or {}),
    figures=dict(figures or {}),
    device=device_note() if device is HERE else device,
    commit=git_commit() if commit is HERE else commit,
    date=today() if date is HERE else date,
    source="run",
    origin=None,
    note=note,
    cells=None,
  )


def imported(
  record: RunRecord,
  experiment: str,
  *,
  variant: Optional[str] = None,
  device: Optional[str] = None,
  note: Optional[str] = None,
  round_games: Optional[float] = None,
) -> RunRecord:
  """A run directory's record as a project records file holds it: under
  `experiment` (a table's), with `variant`, `device` and `note` replaced
  where given (the name a table shows, where it ran when the process could
  not tell, how it was trained and scored), and with `round_games` the
  round it reached, `evaluation["round"]`: its games played over the games
  of a round, to the nearest (the NDMZ paper's round is 300 games). Its
  command's absolute paths (a record written before paths were relative)
  become relative to this checkout's root (`repo_command`).

  Raises:
    ValueError: `round_games` not > 0, or a record without its games played.
  """
  evaluation = dict(record.evaluation)
  if round_games is not None:
    if not round_games > 0:
      raise ValueError(f"the games of a round must be > 0, got {round_games}")
    games = evaluation.get("games_played")
    if games is None:
      raise ValueError(
        f"a record of {record.experiment}/{record.variant} has no games played, so no round"
      )
    evaluation["round"] = int(round(float(games) / round_games))
  return dataclasses.replace(
    record,
    experiment=experiment,
    variant=record.variant if variant is None else variant,
    device=record.device if device is None else device,
    note=record.note if note is None else note,
    evaluation=evaluation,
    command=repo_command(record.command),
  )
