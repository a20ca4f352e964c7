"""Strength against published bars: train (or reuse) a run per game and seed,
evaluate it against the bar's opponent, and write one Markdown table.

The bars are data, not code (the shipped `anakin_mz/configs/strength.yaml`,
`BAR_FILE`): each names a config (a shipped one by name, or a YAML path),
a wall-clock budget, an opponent (a bot of the game, `envs.bots`), the figure
to read from the evaluation result and the value to reach. So this module,
like the rest of the agent, names no game. `anakin-mz strength`
(`anakin_mz.cli.strength`) is its command line.

Each run is an ordinary run directory `<runs>/<bar>/seed<S>` (TensorBoard,
checkpoints) plus `strength.json`, the training wall-clock and the
evaluation, and `record.jsonl`, its run record (`records`: what
`docs/results/tables.yaml` draws the strength tables from; a run's
`record.jsonl` copied under `docs/results/strength_runs/<bar>/seed<S>/`
joins them). A second call reuses a finished run and only re-evaluates it
when asked, so a table can be rebuilt without retraining.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple


from anakin_mz import config as config_lib
from anakin_mz.eval import report
from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments import tables

# The project's bars, shipped with the package.
BAR_FILE = config_lib.shipped_path("strength.yaml")

RECORD_FILE = "record.jsonl"
_FIELDS = ("name", "config", "minutes", "measure", "bar", "opponent", "games", "source")


@dataclasses.dataclass(frozen=True)
class Bar:
  """A published bar for one game.

  Attributes:
    name: the row's name, unique in the file (e.g. "nannon_12_5_6").
    config: the training config: the name of a shipped config (e.g.
      "nannon_12_5_6"), or a YAML path (a relative one from the bar file's
      directory), as `config.resolve` reads it.
    minutes: the `train.py --minutes` budget.
    measure: the figure to read, a dotted path into the evaluation result
      (`anakin_mz.eval.report.evaluate_checkpoint`): "wdl.win" (a win rate
      with its Wilson interval), "score" (a mean with its 95% interval) or
      "exact.greedy_vs_optimal" (an exact number, no interval).
    bar: the value the figure must reach (>=).
    opponent: the opponent spec (a bot of the game), or None where the
      agent plays every seat.
    games: evaluation games.
    source: where the bar comes from (shown in the table).
    overrides: `section.key=value` config overrides for the run.
    extra_policies: which policies the game's extra evaluators score
      (`evaluate_checkpoint`'s `extra_policies`: "greedy", "search"); empty:
      both.
  """

  name: str
  config: str
  minutes: float
  measure: str
  bar: float
  opponent: Optional[str] = None
  games: int = 1000
  source: str = ""
  overrides: Tuple[str, ...] = ()
  extra_policies: Tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Row:
  """One bar, one seed: the figure read from its evaluation.

  Attributes:
    value: the figure; low/high its 95% interval (equal to it when exact).
    met: value >= the bar.
    updates: gradient updates the run made; wall_s its training wall-clock.
    command: the `anakin-mz train` command that trains this run.
  """

  bar: Bar
  seed: int
  value: float
  low: float
  high: float
  exact: bool
  updates: int
  wall_s: float
  command: str

  @property
  def met(self) -> bool:
    return self.value >= self.bar.bar


def load_bars(path: Optional[str] = None) -> List[Bar]:
  """The bars of a YAML file `{bars: [{name, config, minutes, measure, bar,
  ...}, ...]}` (default `BAR_FILE`); a config that is a path is made
  relative to the file, a shipped config's name is kept. A bar with
  `extends: NAME` takes the fields of the bar NAME above it, its own
  replacing them (`overrides` too, as a whole), so an ablation holds only
  its name, its overrides and its source.

  Raises:
    ValueError: a missing file, an unknown or missing field, a bad value, a
      repeated name or an unknown bar to extend, with what is valid.
  """
  path = BAR_FILE if path is None else path
  raw = config_lib.read_yaml(path, "bar file")
  if not isinstance(raw, dict) or not isinstance(raw.get("bars"), list):
    raise ValueError(f"bar file {path!r} must hold a list under 'bars'")
  base = os.path.dirname(os.path.abspath(path))
  bars: List[Bar] = []
  written: Dict[str, Dict[str, object]] = {}  # each bar's fields, its parent's merged in
  for i, item in enumerate(raw["bars"]):
    where = f"{path!r} bar {i}"
    if not isinstance(item, dict):
      raise ValueError(f"{where} must be a mapping")
    unknown = set(item) - set(_FIELDS) - {"overrides", "extra_policies", "extends"}
    if unknown:
      raise ValueError(
        f"{where}: unknown field(s) {sorted(unknown)}; valid: {', '.join(_FIELDS)}, "
        "overrides, extra_policies, extends"
      )
    if "extends" in item:
      parent = item["extends"]
      if not isinstance(parent, str) or parent not in written:
        raise ValueError(
          f"{where}: extends {parent!r}, which is not the name of a bar above it; "
          f"bars above: {', '.join(written) or 'none'}"
        )
      item = {**{k: v for k, v in written[parent].items() if k != "name"}, **item}
      del item["extends"]
    if "name" in item:
      written[str(item["name"])] = item
    missing = [k for k in ("name", "config", "minutes", "measure", "bar") if k not in item]
    if missing:
      raise ValueError(f"{where}: missing field(s) {missing}")
    bar = Bar(
      name=str(item["name"]),
      config=_config_of(str(item["config"]), base),
      minutes=float(item["minutes"]),
      measure=str(item["measure"]),
      bar=float(item["bar"]),
      opponent=None if item.get("opponent") is None else str(item["opponent"]),
      games=int(item.get("games", 1000)),
      source=str(item.get("source", "")),
      overrides=tuple(str(o) for o in item.get("overrides") or ()),
      extra_policies=tuple(str(p) for p in item.get("extra_policies") or ()),
    )
    if bar.minutes <= 0 or bar.games < 1:
      raise ValueError(f"{where}: minutes must be > 0 and games >= 1")
    # A bar's evaluation is the search agent's (`run_bar`).
    valid = report.scorable_policies("search")
    bad = [p for p in bar.extra_policies if p not in valid]
    if bad:
      raise ValueError(f"{where}: extra_policies {bad} unknown; valid: {', '.join(valid)}")
    if bar.name in (b.name for b in bars):
      raise ValueError(f"{where}: the name {bar.name!r} is used twice")
    bars.append(bar)
  return bars


def _config_of(text: str, base: str) -> str:
  """A bar's `config` as written -> what `config.load` reads: a path (from
  the bar file's directory `base`) where that is a file, else the text (a
  shipped config's name; `check_config` reports one that is neither)."""
  path = os.path.normpath(os.path.join(base, text))
  return path if os.path.isfile(path) else text


def select(bars: Sequence[Bar], names: Optional[Sequence[str]]) -> List[Bar]:
  """The bars named in `names` (all when None), in the file's order."""
  if not names:
    return list(bars)
  known = [b.name for b in bars]
  unknown = [n for n in names if n not in known]
  if unknown:
    raise ValueError(f"unknown bar(s) {unknown}; valid: {', '.join(known)}")
  return [b for b in bars if b.name in names]


def check_config(bar: Bar) -> None:
  """Loads `bar`'s config with its overrides, so that a missing file, an
  unknown key or a bad value fails before any bar trains (a bar file's
  last bar may otherwise fail an hour in).

  Raises:
    ValueError: naming the bar, with the config's own message.
  """
  try:
    config_lib.load(bar.config, list(bar.overrides))
  except ValueError as e:
    raise ValueError(f"bar {bar.name!r}: {e}") from None


def read_measure(result: Mapping[str, object], measure: str) -> Tuple[float, float, float, bool]:
  """(value, low, high, exact) of `measure` in an evaluation result.

  A dict with `rate` (a Wilson win rate) or `mean` (a score) gives its
  interval; a bare number is exact (low = high = value).

  Raises:
    ValueError: the path does not exist in the result (lists what does).
  """
  node: object = result
  for part in measure.split("."):
    if not isinstance(node, Mapping) or part not in node:
      have = sorted(node) if isinstance(node, Mapping) else type(node).__name__
      raise ValueError(f"measure {measure!r}: no {part!r} in the evaluation result; it has {have}")
    node = node[part]
  if isinstance(node, Mapping):
    key = "rate" if "rate" in node else "mean" if "mean" in node else None
    if key is None or "low" not in node or "high" not in node:
      raise ValueError(f"measure {measure!r} is neither a rate nor a mean with an interval")
    return float(node[key]), float(node["low"]), float(node["high"]), False
  if isinstance(node, (int, float)):
    return float(node), float(node), float(node), True
  raise ValueError(f"measure {measure!r} is a {type(node).__name__}, not a number")


def train_command(bar: Bar, seed: int, logdir: str) -> str:
  """The `anakin-mz train` command line that trains this run."""
  env = config_lib.load(bar.config).env
  config = records_lib.repo_path(bar.config) if os.path.isabs(bar.config) else bar.config
  args = [
    "anakin-mz",
    "train",
    f"--env={env}",
    f"--config={config}",
    f"--minutes={bar.minutes:g}",
    f"--seed={seed}",
    f"--logdir={logdir}",
    *bar.overrides,
  ]
  return " ".join(shlex.quote(a) for a in args)


def run_bar(
  bar: Bar,
  seed: int,
  runs: str,
  *,
  reevaluate: bool = False,
  progress: bool = True,
  train: bool = True,
  log: Callable[[str], None] = print,
) -> Optional[Row]:
  """Trains `bar` for `seed` under `<runs>/<name>/seed<seed>` (unless that run
  is finished) and evaluates its latest checkpoint (unless evaluated and not
  `reevaluate`). With `train=False` a run that is not finished is left
  alone and the result is None (a partial table: `markdown(missing=...)`).

  A run directory with checkpoints but no `strength.json` was interrupted:
  it is an error (delete it to train again), since a resumed run would not
  have the bar's wall-clock budget.
  """
  from anakin_mz.eval import periodic
  from anakin_mz.runtime import run

  logdir = os.path.join(runs, bar.name, f"seed{seed}")
  record_path = os.path.join(logdir, "strength.json")
  record: Dict[str, object] = {}
  if os.path.exists(record_path):
    with open(record_path, encoding="utf-8") as f:
      record = json.load(f)
  config = config_lib.load(bar.config, list(bar.overrides) + [f"seed={seed}"])
  command = train_command(bar, seed, logdir)
  if "wall_s" not in record:
    if not train:
      return None
    if os.path.isdir(os.path.join(logdir, "checkpoints")):
      raise ValueError(
        f"{logdir!r} holds an unfinished run (checkpoints but no strength.json); "
        "delete it to train this bar again"
      )
    log(f"[{bar.name} seed {seed}] training {bar.minutes:g} min: {command}")
    commit = records_lib.git_commit()  # the code that trains, not the checkout after it
    start = time.perf_counter()
    result = run.train(
      config,
      logdir=logdir,
      max_minutes=bar.minutes,
      progress=progress,
      evaluate=periodic.evaluate,
    )
    record = {
      "wall_s": time.perf_counter() - start,
      "updates": result.saved_step or 0,
      "command": command,
      "device": records_lib.device_note(),
      "commit": commit,
      "date": records_lib.today(),
    }
    records_lib.write_json(record_path, record, indent=1)
  if "evaluation" not in record or reevaluate:
    against = bar.opponent or "random (the default; a one-player game plays alone)"
    log(f"[{bar.name} seed {seed}] evaluating {bar.games} games against {against}")
    evaluation = report.evaluate_checkpoint(
      os.path.join(logdir, "checkpoints"),
      opponent=bar.opponent,
      games=bar.games,
      seed=seed,
      extra_policies=bar.extra_policies or None,
    )
    record["evaluation"] = {k: v for k, v in evaluation.items() if k != "dynamics_table"}
    records_lib.write_json(record_path, record, indent=1)
    records_lib.write(os.path.join(logdir, RECORD_FILE), [to_record(bar, seed, record)])
  elif not os.path.exists(os.path.join(logdir, RECORD_FILE)):  # a run from before records
    records_lib.write(os.path.join(logdir, RECORD_FILE), [to_record(bar, seed, record)])
  value, low, high, exact = read_measure(record["evaluation"], bar.measure)  # type: ignore[arg-type]
  return Row(
    bar=bar,
    seed=seed,
    value=value,
    low=low,
    high=high,
    exact=exact,
    updates=int(record["updates"]),  # type: ignore[arg-type]
    wall_s=float(record["wall_s"]),  # type: ignore[arg-type]
    command=str(record["command"]),
  )


def to_record(bar: Bar, seed: int, record: Mapping[str, object]) -> records_lib.RunRecord:
  """The run record (`records`) of one bar and seed from its `strength.json`
  `record`: the bar is its variant, the bar's measure, value to reach,
  opponent and games its evaluation settings."""
  evaluation: Mapping[str, object] = record["evaluation"]  # type: ignore[assignment]
  settings = {"measure": bar.measure, "target": bar.bar, "opponent": bar.opponent}
  settings.update({k: evaluation[k] for k in ("games", "seed", "agent", "simulations", "step")})
  return records_lib.new(
    "strength",
    bar.name,
    seed,
    command=str(record["command"]),
    overrides=bar.overrides,
    budget=records_lib.Budget(
      minutes=bar.minutes,
      updates=int(record["updates"]),  # type: ignore[arg-type]
      train_minutes=float(record["wall_s"]) / 60,  # type: ignore[arg-type]
    ),
    evaluation=settings,
    figures=records_lib.figures_of(evaluation),
    # Where and when it trained (a run from before these were kept: unknown).
    device=record.get("device"),
    commit=record.get("commit"),
    date=record.get("date"),
  )


def markdown(
  rows: Sequence[Row], *, header: str = "", missing: Sequence[Tuple[Bar, int]] = ()
) -> str:
  """The results table, one row per bar and seed, then the commands; the
  `missing` (bar, seed) runs are listed as not run."""
  lines = [header] if header else []
  head = ["bar", "seed", "opponent", "measure", "score", "95% interval", "bar to reach", "met"]
  head += ["updates", "train wall-clock"]
  cells = [
    [
      r.bar.name,
      str(r.seed),
      r.bar.opponent or "(plays every seat)",
      f"`{r.bar.measure}`",
      f"{r.value:.3f}",
      "exact" if r.exact else f"[{r.low:.3f}, {r.high:.3f}]",
      f">= {r.bar.bar:g}",
      "yes" if r.met else "**no**",
      str(r.updates),
      f"{r.wall_s / 60:.1f} min",
    ]
    for r in rows
  ]
  lines.append(tables.grid(head, cells))
  if missing:
    lines += ["", "Not run yet: " + ", ".join(f"{b.name} seed {s}" for b, s in missing) + "."]
  lines += ["", "Commands (each run directory also holds `strength.json`):", ""]
  lines += [f"- {r.bar.name}, seed {r.seed}: `{r.command}`" for r in rows]
  sources = {r.bar.name: r.bar.source for r in rows if r.bar.source}
  if sources:
    lines += ["", "Where the bars come from:", ""]
    lines += [f"- {name}: {src}" for name, src in sources.items()]
  return "\n".join(lines) + "\n"
