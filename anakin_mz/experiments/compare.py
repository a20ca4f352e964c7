"""Several agents on one game with the same budget, scored on a schedule: the
NDMZ paper's Figures 2 and 3 as a library. `scripts/compare.py` is its
command line.

Design: each run (an agent and a seed) is an ordinary run directory
(`<out>/<label>/`: TensorBoard events, Orbax checkpoints) trained by
`anakin_mz.runtime.run.train` in chunks, one chunk per schedule point, with the
training loop's own periodic evaluation switched off. After each chunk the
checkpoint it saved is scored by `run.evaluate` (the training loop's
evaluation: greedy search vs random in a match, the game's exact evaluators
on the greedy network policy, the paper's dynamics tests), the scores go to
the run's TensorBoard and to one JSON line in `<out>/<label>/compare.jsonl`.
The table and the figures are drawn from those lines only. Each scored
point is also a run record (`records`) in `<out>/<label>/records.jsonl`
(the experiment: `out`'s name; the variant: the label without its seed).

* Budget: env steps (each run trains until its env steps reach the next
  point of the schedule) or minutes of training wall-clock (scoring time not
  counted). With an env-step budget `train.total_updates` is set to the
  updates the budget takes, so a cosine learning-rate schedule ends with it.
* Wall-clock: the seconds `run.train` spent from its start to its last step,
  summed over chunks (JIT compilation included, once per chunk; the scoring
  and the final checkpoint write excluded).
* Resume: run the same comparison again. Each run resumes from its last
  checkpoint (bit-identical, `run.train`); points already scored are kept.
  A chunk killed half-way is trained again from its last checkpoint, and its
  lost time is not counted.
* Agents: `agent=<name>` is passed to the config as an override where the
  config knows an `agent` key; where it does not, only `ndmz` is valid.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import time
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from anakin_mz import config as config_lib
from anakin_mz.experiments import records as records_lib

DEFAULT_AGENT = "ndmz"  # the only agent of a config without an `agent` key
SPEC_FILE = "compare.json"
ROWS_FILE = "compare.jsonl"
RECORDS_FILE = "records.jsonl"
# The paper's two dynamics tests (Figure 3).
FIGURE3_METRICS = ("top_move", "uniform")


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One run of a comparison: an agent, its extra overrides and a seed."""

  agent: str
  seed: int
  overrides: Tuple[str, ...] = ()

  @property
  def label(self) -> str:
    """The run's directory name: `<agent>[_<overrides>]_s<seed>`."""
    extra = "_".join(re.sub(r"[^A-Za-z0-9.-]+", "-", o) for o in self.overrides)
    return f"{self.agent}{'_' + extra if extra else ''}_s{self.seed}"


@dataclasses.dataclass(frozen=True)
class Budget:
  """What every run gets: `total` env steps or minutes (`unit`), scored
  every `every` of the same unit (and at the start)."""

  unit: str  # "env_steps" | "minutes"
  total: float
  every: float

  def __post_init__(self):
    if self.unit not in ("env_steps", "minutes"):
      raise ValueError(f"budget unit must be 'env_steps' or 'minutes', got {self.unit!r}")
    if not self.total > 0:
      raise ValueError(f"the budget must be > 0, got {self.total}")
    if not 0 < self.every <= self.total:
      raise ValueError(
        f"the schedule interval must be in (0, budget={self.total}], got {self.every}"
      )

  def points(self) -> List[float]:
    """The schedule: every, 2 every, ..., total (the last point is total)."""
    n = math.ceil(self.total / self.every - 1e-9)
    return [min(self.total, self.every * (i + 1)) for i in range(n)]


def parse_runs(agents: str, seeds: Sequence[int]) -> List[RunSpec]:
  """`"ndmz,ndmz:search.num_simulations=8"`, seeds (0, 1) -> one RunSpec per
  agent entry and seed. An entry is `NAME[:KEY=VALUE[:KEY=VALUE...]]`."""
  specs = []
  entries = [e.strip() for e in agents.split(",")]
  if not entries or not all(entries):
    raise ValueError(f"--agents must be a comma-separated list of names, got {agents!r}")
  if not seeds:
    raise ValueError("give at least one seed")
  for entry in entries:
    name, *overrides = entry.split(":")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
      raise ValueError(f"agent name {name!r} in {entry!r} is not a name")
    for o in overrides:
      if "=" not in o:
        raise ValueError(f"agent override {o!r} in {entry!r} is not of the form KEY=VALUE")
    for seed in seeds:
      specs.append(RunSpec(name, int(seed), tuple(overrides)))
  labels = [s.label for s in specs]
  if len(set(labels)) != len(labels):
    raise ValueError(f"--agents lists the same run twice: {labels}")
  return specs


def _knows_agent_key() -> bool:
  """Does this code's config have an `agent` key (the multi-agent build)?"""
  return "agent" in {f.name for f in dataclasses.fields(config_lib.Config)}


def run_config(
  path: str, overrides: Sequence[str], spec: RunSpec, budget: Budget
) -> config_lib.Config:
  """The config of one run: the file, the comparison's overrides, the
  agent's, its seed; the training loop's own evaluation off.

  Raises:
    ValueError: a bad override, or an agent other than ndmz where the
      config has no `agent` key (the message lists what is valid).
  """
  over = list(overrides)
  if _knows_agent_key():
    over.append(f"agent={spec.agent}")
  elif spec.agent != DEFAULT_AGENT:
    raise ValueError(
      f"agent {spec.agent!r}: this build's config has no `agent` key, so the only "
      f"valid agent is {DEFAULT_AGENT!r}"
    )
  over += list(spec.overrides) + [f"seed={spec.seed}", "train.eval_every=0"]
  config = config_lib.load(path, over)
  if budget.unit == "env_steps":
    # The learning-rate and temperature schedules end with the budget.
    updates = math.ceil(budget.total / env_steps_per_update(config))
    config = config_lib.load(path, over + [f"train.total_updates={max(1, updates)}"])
  return config


def env_steps_per_update(config: config_lib.Config) -> float:
  """Env transitions per gradient update, from the config (global sizes:
  `train.num_envs` and `train.batch_size` cover all devices)."""
  tc = config.train
  transitions = tc.rollout_length * tc.num_envs
  return transitions / tc.updates_per_chunk(transitions)


# ------------------------------------------------------------------ rows ----


def read_rows(run_dir: str) -> List[Dict[str, object]]:
  """The scored points of one run, in order (an unfinished last line, from
  a process killed while writing it, is dropped)."""
  path = os.path.join(run_dir, ROWS_FILE)
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        break
  return rows


def _append_row(run_dir: str, row: Dict[str, object]) -> None:
  with open(os.path.join(run_dir, ROWS_FILE), "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")
    f.flush()
    os.fsync(f.fileno())


def _scalar(x) -> float:
  return float(np.ravel(np.asarray(jax.device_get(x)))[0])


def score_checkpoint(run_dir: str, num_games: int, key: jax.Array) -> Dict[str, float]:
  """`run.evaluate` (the training loop's evaluation) on the latest
  checkpoint of `run_dir`."""
  from anakin_mz.runtime import restore as agent_lib
  from anakin_mz.runtime import run

  agent = agent_lib.load_agent(os.path.join(run_dir, "checkpoints"))
  return run.evaluate(agent, agent.params, key, num_games)


class Interrupted(Exception):
  """A signal stopped a run's training chunk (its checkpoint is saved)."""


def _say(text: str) -> None:
  print(text, flush=True)


def compare(
  config_path: str,
  overrides: Sequence[str],
  runs: Sequence[RunSpec],
  budget: Budget,
  out: str,
  *,
  eval_games: int = 500,
  title: str = "",
  say=_say,
) -> Dict[str, List[Dict[str, object]]]:
  """Trains and scores every run to the budget (see the module doc);
  resumes what `out` already holds; rewrites the report (`write_report`)
  after each round of the schedule. Returns {label: rows}.

  Raises:
    ValueError: bad settings, or `out` holding a comparison with other
      settings (the message names the differences).
  """
  from anakin_mz.runtime import run as run_lib

  if eval_games < 2 or eval_games % 2:
    raise ValueError(f"eval games must be an even number >= 2, got {eval_games}")
  configs = {s.label: run_config(config_path, overrides, s, budget) for s in runs}
  spec = {
    "config": os.path.abspath(config_lib.resolve(config_path)),
    "overrides": list(overrides),
    "runs": [dataclasses.asdict(s) for s in runs],
    "budget": dataclasses.asdict(budget),
    "eval_games": eval_games,
  }
  spec = json.loads(json.dumps(spec))  # as it reads back (tuples as lists)
  _check_spec(out, spec, title)
  reference = references(next(iter(configs.values())))
  rows = {s.label: read_rows(os.path.join(out, s.label)) for s in runs}
  seconds = {label: (r[-1]["train_s"] if r else 0.0) for label, r in rows.items()}

  def chunk(s: RunSpec, max_updates: int, max_minutes: Optional[float]) -> None:
    """Trains one chunk, scores its checkpoint, appends the row."""
    label, run_dir = s.label, os.path.join(out, s.label)
    config = configs[label]
    t0 = time.perf_counter()
    result = run_lib.train(
      config,
      logdir=run_dir,
      resume=True,
      max_updates=max_updates,
      max_minutes=max_minutes,
      progress=False,
    )
    if result.history:
      seconds[label] += result.history[-1]["wall_s"]
    if result.stopped_by in ("SIGINT", "SIGTERM"):
      raise Interrupted(f"{result.stopped_by} while training {label}")
    step = int(_scalar(result.state.update_step))
    env_steps = float(jnp.sum(result.state.env_steps))
    t1 = time.perf_counter()
    key = jax.random.fold_in(jax.random.PRNGKey(config.seed + 7919), step)
    scores = score_checkpoint(run_dir, eval_games, key)
    row = {
      "label": label,
      "agent": s.agent,
      "seed": s.seed,
      "update_step": step,
      "env_steps": env_steps,
      "train_s": seconds[label],
      "score_s": time.perf_counter() - t1,
      "chunk_s": t1 - t0,
      **{k: float(v) for k, v in scores.items() if "/" in k},
    }
    _append_row(run_dir, row)
    records_lib.append(os.path.join(run_dir, RECORDS_FILE), _record(out, s, row, spec, config))
    rows[label].append(row)
    from anakin_mz.runtime.summary import SummaryWriter

    writer = SummaryWriter(run_dir)
    writer.scalars(
      step,
      {
        **{k: v for k, v in row.items() if "/" in k},
        "compare/env_steps": env_steps,
        "compare/train_minutes": seconds[label] / 60,
      },
    )
    writer.close()
    say(
      f"[{label}] update {step} env_steps {env_steps:.0f} train {seconds[label] / 60:.1f} min "
      + " ".join(f"{k}={v:.3f}" for k, v in row.items() if _is_headline(k))
    )

  # The untrained agents first, then round robin over the schedule: at any
  # time every run has about the same budget behind it.
  try:
    _schedule(runs, rows, budget, configs, chunk, out, reference, title)
  except Interrupted as e:
    say(f"{e}: stopped; run the same command again to resume")
  return rows


def _record(out, s: RunSpec, row, spec, config) -> records_lib.RunRecord:
  """The run record of one scored point; its command reruns the whole run."""
  b = spec["budget"]
  args = ["anakin-mz compare", f"--env={config.env}", f"--config={spec['config']}"]
  args += [f"--agents={':'.join((s.agent,) + s.overrides)}", f"--seeds={s.seed}"]
  args += [f"--{b['unit'].replace('_', '-')}={b['total']:g}", f"--every={b['every']:g}"]
  args += [f"--eval-games={spec['eval_games']}", f"--out={out}", *spec["overrides"]]
  return records_lib.new(
    os.path.basename(os.path.normpath(out)),
    s.label[: -len(f"_s{s.seed}")],
    s.seed,
    command=" ".join(args),
    overrides=list(spec["overrides"]) + list(s.overrides),
    budget=records_lib.Budget(
      minutes=b["total"] if b["unit"] == "minutes" else None,
      updates=int(row["update_step"]),
      env_steps=float(row["env_steps"]),
      train_minutes=row["train_s"] / 60,
    ),
    evaluation={"games": spec["eval_games"], "agent": s.agent},
    figures={k: records_lib.Figure(float(v)) for k, v in row.items() if "/" in k},
  )


def _schedule(runs, rows, budget, configs, chunk, out, reference, title) -> None:
  for s in runs:
    if not rows[s.label]:
      chunk(s, 0, None)
  write_report(out, rows, budget, reference, title)
  for point in budget.points():
    for s in runs:
      last = rows[s.label][-1]
      if budget.unit == "env_steps":
        if last["env_steps"] >= point:
          continue
        rate = _measured_rate(rows[s.label]) or env_steps_per_update(configs[s.label])
        need = math.ceil((point - last["env_steps"]) / rate)
        chunk(s, int(last["update_step"]) + max(1, need), None)
      else:
        total = configs[s.label].train.total_updates
        if last["train_s"] >= 60 * point - 1e-6 or last["update_step"] >= total:
          continue  # this point reached, or the config's update budget spent
        minutes = point - last["train_s"] / 60
        chunk(s, total, minutes)
    write_report(out, rows, budget, reference, title)


def _measured_rate(rows: List[Dict[str, object]]) -> Optional[float]:
  """Env steps per update over the scored points so far (None before any
  update)."""
  first, last = rows[0], rows[-1]
  du = last["update_step"] - first["update_step"]
  return (last["env_steps"] - first["env_steps"]) / du if du > 0 else None


def read_spec(out: str) -> Dict[str, object]:
  """The settings of the comparison in `out` (`compare.json`)."""
  path = os.path.join(out, SPEC_FILE)
  if not os.path.exists(path):
    raise ValueError(f"{out!r} holds no comparison ({SPEC_FILE} is missing)")
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"cannot read {path!r}: {e}") from None


def _check_spec(out: str, spec: Dict[str, object], title: str) -> None:
  path = os.path.join(out, SPEC_FILE)
  if os.path.exists(path):
    old = read_spec(out)
    diffs = [f"{k}: {old.get(k)!r} there, {v!r} now" for k, v in spec.items() if old.get(k) != v]
    if diffs:
      raise ValueError(
        f"{out!r} holds a comparison with other settings ({'; '.join(diffs)}); "
        "run the same command to resume it, or pick another --out"
      )
    return
  try:
    os.makedirs(out, exist_ok=True)
  except OSError as e:
    raise ValueError(f"cannot create {out!r}: {e}") from None
  with open(path, "w", encoding="utf-8") as f:
    json.dump({**spec, "title": title}, f, indent=1)


MERGED_SETTINGS = ("config", "overrides", "budget", "eval_games")


def _label(run: Mapping[str, object]) -> str:
  """The directory name of a run listed in a `compare.json`."""
  return RunSpec(run["agent"], run["seed"], tuple(run["overrides"])).label


def merge(out: str, sources: Sequence[str]) -> Dict[str, object]:
  """One comparison in `out` over the runs of several (e.g. one per seed,
  each trained on its own core): `out/compare.json` lists every run, and
  `out/<label>` links to each run directory (absolute symbolic links; the
  runs stay where they are). The comparisons must share their settings
  (config, overrides, budget, eval games) and name each run once. `out`
  may already hold the same merge, or a merge of some of these runs (it is
  written again); any other comparison there is refused. The runs are
  listed agent by agent (in order of first appearance), seeds ascending.
  Returns the spec.
  """
  if len(sources) < 2:
    raise ValueError(f"--merge needs at least two comparisons, got {len(sources)}")
  specs = [read_spec(src) for src in sources]

  def differing(spec):  # the settings in which `spec` is not the first source's
    return [k for k in MERGED_SETTINGS if spec.get(k) != specs[0].get(k)]

  for src, spec in zip(sources[1:], specs[1:]):
    diffs = [
      f"{k}: {specs[0].get(k)!r} in {sources[0]!r}, {spec.get(k)!r} there" for k in differing(spec)
    ]
    if diffs:
      raise ValueError(f"cannot merge {src!r}: other settings ({'; '.join(diffs)})")
  runs, links = [], {}
  for src, spec in zip(sources, specs):
    for r in spec["runs"]:
      label = _label(r)
      if label in links:
        raise ValueError(f"run {label!r} is in both {links[label][0]!r} and {src!r}")
      target = os.path.realpath(os.path.join(src, label))
      if not os.path.isdir(target):
        raise ValueError(f"{src!r} lists run {label!r} but has no directory {target!r}")
      links[label] = (src, target)
      runs.append(r)
  if os.path.exists(os.path.join(out, SPEC_FILE)):
    # Rewriting `out` is fine while it only grows the merge held there; any
    # other comparison in it would be silently replaced.
    held = read_spec(out)
    held_labels = [_label(r) for r in held["runs"]]
    lost = [label for label in held_labels if label not in links]
    if lost or differing(held):
      why = f"runs {lost} not in this merge" if lost else "other settings"
      raise ValueError(f"{out!r} holds another comparison ({why}): pick another --out")
  os.makedirs(out, exist_ok=True)
  for label, (_, target) in links.items():
    link = os.path.join(out, label)
    if os.path.islink(link):
      os.remove(link)
    elif os.path.exists(link):
      raise ValueError(f"{link!r} exists and is not a link: pick another --out")
    os.symlink(target, link)
  seeds = sorted({r["seed"] for r in runs})
  agents = list(dict.fromkeys(r["agent"] for r in runs))
  runs.sort(key=lambda r: (agents.index(r["agent"]), r["seed"]))  # an agent's seeds together
  title = specs[0].get("title", "").rsplit(": ", 1)[0]  # "<env> <params>: <agents>, seeds .."
  spec = {k: specs[0][k] for k in MERGED_SETTINGS}
  spec.update(runs=runs, title=f"{title}: {','.join(agents)}, seeds {' '.join(map(str, seeds))}")
  with open(os.path.join(out, SPEC_FILE), "w", encoding="utf-8") as f:
    json.dump(spec, f, indent=1)
  return spec


def load_rows(out: str) -> Dict[str, List[Dict[str, object]]]:
  """{label: rows} of every run of the comparison in `out`."""
  spec = read_spec(out)
  labels = [_label(r) for r in spec["runs"]]
  return {label: read_rows(os.path.join(out, label)) for label in labels}


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


def _interp(rows, x_key: str, y_key: str, x: float) -> Optional[float]:
  xs = np.array([r[x_key] for r in rows if y_key in r], np.float64)
  ys = np.array([r[y_key] for r in rows if y_key in r], np.float64)
  if len(xs) == 0 or x > xs[-1] + 1e-9 or x < xs[0] - 1e-9:
    return None
  return float(np.interp(x, xs, ys))


def _short(key: str) -> str:
  return key.split("/", 1)[-1]


def markdown(rows: Dict[str, List[Dict[str, object]]], budget: Budget, title: str = "") -> str:
  """The comparison as Markdown: the last scored point of each run, then
  the scores at equal env steps and at equal wall-clock (linear
  interpolation between scored points; an empty cell is past that run's
  last point)."""
  keys = score_keys(rows)
  dyn = sorted(
    {k for rs in rows.values() for r in rs for k in r if k.startswith("dynamics/")},
    key=_dyn_order,
  )
  dyn = [k for k in dyn if _dyn_metric(k) in FIGURE3_METRICS]
  lines = [f"## {title}", ""] if title else []
  head = ["run", "agent", "seed", "updates", "env steps", "train min"] + [_short(k) for k in keys]
  lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
  for label, rs in rows.items():
    if not rs:
      continue
    r = rs[-1]
    cells = [label, str(r["agent"]), str(r["seed"]), str(r["update_step"])]
    cells += [f"{r['env_steps']:.0f}", f"{r['train_s'] / 60:.1f}"]
    cells += [f"{r[k]:.4f}" if k in r else "" for k in keys]
    lines.append("| " + " | ".join(cells) + " |")
  for x_key, name, fmt, grid in (
    ("env_steps", "env steps", "{:.0f}", _grid(rows, "env_steps", 1.0)),
    ("train_s", "train minutes", "{:.1f}", _grid(rows, "train_s", 1 / 60)),
  ):
    for k in keys[:2]:  # the exact scores (the first two) at equal budget
      lines += ["", f"{_short(k)} at equal {name}:", ""]
      labels = [label for label, rs in rows.items() if rs]
      lines += ["| " + name + " | " + " | ".join(labels) + " |", "|" + " --- |" * (len(labels) + 1)]
      for x in grid:
        cells = []
        for label in labels:
          v = _interp(rows[label], x_key, k, x)
          cells.append("" if v is None else f"{v:.4f}")
        shown = x / 60 if x_key == "train_s" else x
        lines.append(f"| {fmt.format(shown)} | " + " | ".join(cells) + " |")
  if dyn:
    lines += ["", "dynamics tests at the last scored point (success rate by depth k):", ""]
    head = ["run"] + [_short(k) for k in dyn]
    lines += ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for label, rs in rows.items():
      if rs and any(k in rs[-1] for k in dyn):
        lines.append(
          "| "
          + label
          + " | "
          + " | ".join(f"{rs[-1].get(k, float('nan')):.3f}" for k in dyn)
          + " |"
        )
  return "\n".join(lines) + "\n"


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
) -> List[str]:
  """Figure 2 style (`figure2.png`: each exact score against env steps and
  against training minutes, one line per run, one colour per agent) and
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
    fig, axes = plt.subplots(2, len(keys), figsize=(4.8 * len(keys), 7.0), squeeze=False)
    for col, k in enumerate(keys):
      for row_i, (x_key, xlabel, scale) in enumerate(
        (("env_steps", "env steps", 1.0), ("train_s", "training wall-clock (minutes)", 1 / 60))
      ):
        ax = axes[row_i, col]
        for label, rs in rows.items():
          pts = [r for r in rs if k in r]
          if not pts:
            continue
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
    fig.suptitle("win rate against env steps and wall-clock (Figure 2 style)")
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
  written = figures(rows, out, reference)
  text = markdown(rows, budget, title)
  if reference:
    text += "\nreference: " + ", ".join(f"{k} {v:.4f}" for k, v in reference.items()) + "\n"
  text += "".join(f"\n![{os.path.basename(p)}]({os.path.basename(p)})\n" for p in written)
  path = os.path.join(out, "compare.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return [path] + written
