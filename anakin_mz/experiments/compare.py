"""Several agents on one game with the same budget, scored on a schedule: the
NDMZ paper's Figures 2 and 3 as a library. It is the engine of a spec with a
`schedule` (`anakin_mz.experiments.schedule`), which `anakin-mz experiment
run` runs; `anakin-mz compare` builds such a spec from its options.

Design: each run (an agent and a seed) is an ordinary run directory
(`<out>/<label>/`: TensorBoard events, Orbax checkpoints) trained by
`anakin_mz.runtime.run.train` in chunks, one chunk per schedule point, with the
training loop's own periodic evaluation switched off. After each chunk the
checkpoint it saved is scored by `periodic.evaluate` (the training loop's
evaluation: greedy search vs random in a match, the game's exact evaluators
on the greedy network policy, the paper's dynamics tests), the scores go to
the run's TensorBoard and to one JSON line in `<out>/<label>/compare.jsonl`.
The table and the figures are drawn from those lines only. Each scored
point is also a run record (`records`) in the spec's records file, by
default `<out>/records.jsonl` (the experiment: `out`'s name, the spec's;
the variant: the label without its seed).

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
  lost time is not counted. Beside each checkpoint a chunk saves, the
  seconds and self-play games behind it (`compare_state`): a chunk stopped
  by a signal resumes with both exact, or is scored where it stopped with
  `score_now`, training nothing.
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
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

from anakin_mz import config as config_lib
from anakin_mz.experiments.compare_report import FIGURE3_METRICS as FIGURE3_METRICS
from anakin_mz.experiments.compare_report import FLAT_AGENTS
from anakin_mz.experiments.compare_report import _is_headline, references, write_report
from anakin_mz.experiments.compare_report import figures as figures
from anakin_mz.experiments.compare_report import markdown as markdown
from anakin_mz.experiments.compare_report import score_keys as score_keys
from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments.compare_records import record as _record
from anakin_mz.experiments.compare_records import rows_from_records as rows_from_records
from anakin_mz.experiments import compare_state as state_lib
from anakin_mz.experiments.schedule import BUDGET_UNITS as BUDGET_UNITS
from anakin_mz.experiments.schedule import Budget as Budget
from anakin_mz.experiments.schedule import RunSpec as RunSpec
from anakin_mz.experiments.compare_state import ROWS_FILE as ROWS_FILE
from anakin_mz.experiments.compare_state import read_rows as read_rows

DEFAULT_AGENT = "ndmz"  # the only agent of a config without an `agent` key
SPEC_FILE = "compare.json"
RECORDS_FILE = "records.jsonl"


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


def _scalar(x) -> float:
  return float(np.ravel(np.asarray(jax.device_get(x)))[0])


def score_checkpoint(run_dir: str, num_games: int, key: jax.Array) -> Dict[str, float]:
  """`periodic.evaluate` (the training loop's evaluation) on the latest
  checkpoint of `run_dir`."""
  from anakin_mz.eval import periodic
  from anakin_mz.runtime import restore

  agent = restore.load_agent(os.path.join(run_dir, "checkpoints"))
  return periodic.evaluate(agent, agent.params, key, num_games)


@dataclasses.dataclass(frozen=True)
class PaperScoring:
  """The NDMZ paper's scoring of every agent by its own play (section 4.2):
  its search player's match against each of `opponents` (bots of the game,
  `games` each, both seats, Wilson intervals), and beside it the game's
  exact evaluators on each of `exact` ("greedy", "search", "value": the
  greedy head, the search table, the value head in a 1-ply expectimax)."""

  opponents: Tuple[str, ...] = ("optimal", "random")
  exact: Tuple[str, ...] = ("greedy", "search", "value")

  def __post_init__(self):
    from anakin_mz.eval.report import EXTRA_POLICIES

    if not self.opponents:
      raise ValueError("the paper's scoring needs at least one opponent (e.g. optimal,random)")
    unknown = [p for p in self.exact if p not in EXTRA_POLICIES]
    if unknown:
      raise ValueError(
        f"exact policies {unknown} unknown: they are a subset of {', '.join(EXTRA_POLICIES)}"
      )


def score_paper(
  run_dir: str, num_games: int, key: jax.Array, scoring: PaperScoring
) -> Dict[str, float]:
  """`PaperScoring` of the latest checkpoint of `run_dir`: `match/search_vs_<opp>`
  (the win rate) with `_low`/`_high` (its 95 % Wilson interval),
  `exact/<policy>_vs_<opp>`, and the dynamics tests where the model has
  NDMZ's heads."""
  from anakin_mz.eval import dynamics, report
  from anakin_mz.runtime import restore

  directory = os.path.join(run_dir, "checkpoints")
  seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
  out: Dict[str, float] = {}
  for i, opponent in enumerate(scoring.opponents):
    result = report.evaluate_checkpoint(
      directory,
      opponent=opponent,
      games=num_games,
      seed=seed + i,
      extra=i == 0 and bool(scoring.exact),
      extra_policies=scoring.exact or None,
    )
    win = result["wdl"]["win"]
    out[f"match/search_vs_{opponent}"] = float(win["rate"])
    out[f"match/search_vs_{opponent}_low"] = float(win["low"])
    out[f"match/search_vs_{opponent}_high"] = float(win["high"])
    for name, value in result.get("exact", {}).items():
      out[f"exact/{name}"] = float(value)
  agent = restore.load_agent(directory)
  if agent.spec.capabilities.dynamics_tests:
    out.update({k: float(v) for k, v in dynamics.learner_hook(agent, agent.params).items()})
  return out


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
  scoring: Optional[PaperScoring] = None,
  score_now: bool = False,
  say=_say,
  train: Optional[Sequence[str]] = None,
  records: Optional[str] = None,
  command: Optional[Callable[[RunSpec], str]] = None,
  on_record: Optional[Callable[[records_lib.RunRecord], None]] = None,
) -> Dict[str, List[Dict[str, object]]]:
  """Trains and scores every run to the budget (see the module doc);
  resumes what `out` already holds; rewrites the report (`write_report`)
  after each round of the schedule. Each point is scored by `periodic.evaluate`
  (the training loop's evaluation), or with `scoring` the NDMZ paper's way
  (`score_paper`). With `score_now` nothing trains: each run whose latest
  checkpoint is past its last scored point (a run a signal or a deadline
  stopped between points) is scored there, as it is, at the games saved
  with it (`_score_as_is`). `train`: the labels of the runs to train and
  score (default all; the report is of every run). Each point's record is
  appended to `records` (default `<out>/records.jsonl`) with `command(run)`
  as its command (default: the `anakin-mz compare` of the run), and handed
  to `on_record`. Returns {label: rows}.

  Raises:
    ValueError: bad settings, `out` holding a comparison with other
      settings (the message names the differences), or with `score_now` a
      checkpoint saved without its game count.
  """
  from anakin_mz.eval import periodic
  from anakin_mz.runtime import run as run_lib

  if eval_games < 2 or eval_games % 2:
    raise ValueError(f"eval games must be an even number >= 2, got {eval_games}")
  configs = {s.label: run_config(config_path, overrides, s, budget) for s in runs}
  if scoring is not None:  # an unknown opponent fails now, not after the first chunk
    from anakin_mz.eval import opponents

    env = next(iter(configs.values())).make_env()
    for opponent in scoring.opponents:
      opponents.make_opponent(opponent, env)
  spec = {
    "config": os.path.abspath(config_lib.resolve(config_path)),
    "overrides": list(overrides),
    "runs": [s.entry() for s in runs],
    "budget": _budget_spec(budget),
    "eval_games": eval_games,
  }
  if scoring is not None:  # (absent otherwise: older comparisons resume)
    spec["scoring"] = dataclasses.asdict(scoring)
  spec = json.loads(json.dumps(spec))  # as it reads back (tuples as lists)
  _check_spec(out, spec, title)
  # The code that trains, read once now: a point's record is written up to
  # an hour later, when the checkout may have moved on.
  commit = records_lib.git_commit()
  reference = references(next(iter(configs.values())))
  rows = {s.label: read_rows(os.path.join(out, s.label)) for s in runs}
  seconds = {
    label: state_lib.trained_seconds(
      r[-1] if r else None, state_lib.read_trained(os.path.join(out, label))
    )
    for label, r in rows.items()
  }

  def games_at_resume(s: RunSpec, saved, first_row) -> float:
    """The games a run had played at the checkpoint its chunk resumed
    from (`first_row`: the chunk's first step): its last scored point's,
    or, where it trained on past that point (a cut scoring, a signal), the
    count saved with the checkpoint (or an estimate, for an older run)."""
    last = rows[s.label][-1] if rows[s.label] else None
    resumed_at = first_row["env_steps"] - first_row["transitions"]
    past = resumed_at > (float(last["env_steps"]) if last else 0.0)
    exact = state_lib.saved_games(saved, resumed_at)
    played = float(last.get("games", 0.0)) if last else 0.0
    if exact is not None:
      if past:
        say(f"[{s.label}] resumed past its last scored point: {exact:.0f} games played in all")
      return exact
    unscored = state_lib.unscored_games(last, first_row)
    if unscored:
      say(
        f"[{s.label}] resumed past its last scored point (its scoring was cut): "
        f"about {unscored:.0f} games played since, counted toward the next round"
      )
    return played + unscored

  def chunk(
    s: RunSpec, max_updates: int, max_minutes: Optional[float], games: Optional[float] = None
  ) -> None:
    """Trains one chunk (to `games` self-play games where given), scores its
    checkpoint, appends the row."""
    label, run_dir = s.label, os.path.join(out, s.label)
    last = rows[label][-1] if rows[label] else None
    saved = state_lib.read_trained(run_dir)
    at_resume: List[float] = []  # known at the chunk's first step
    counted = 0.0

    def stop(step_row) -> bool:
      nonlocal counted
      if not at_resume:
        at_resume.append(games_at_resume(s, saved, step_row))
      counted += step_row["episodes"]
      return games is not None and at_resume[0] + counted >= games

    t0 = time.perf_counter()
    result = run_lib.train(
      configs[label],
      logdir=run_dir,
      resume=True,
      max_updates=max_updates,
      max_minutes=max_minutes,
      progress=False,
      stop=stop,
      evaluate=periodic.evaluate,
    )
    step = int(_scalar(result.state.update_step))
    env_steps = float(jnp.sum(result.state.env_steps))
    played = state_lib.saved_games(saved, env_steps)  # no step made: as saved, if it was
    if played is None:
      played = float(last.get("games", 0.0)) if last else 0.0
    if result.history:
      seconds[label] += result.history[-1]["wall_s"]
      if not at_resume:  # a minutes budget spent in the first step asks no `stop`
        at_resume.append(games_at_resume(s, saved, result.history[0]))
      # Counted from every step `train` made (a minutes budget ends before
      # its last step's `stop`).
      played = at_resume[0] + sum(float(h["episodes"]) for h in result.history)
    # Saved beside the checkpoint before scoring: a resume after a cut
    # scoring or a signal keeps this chunk's seconds and games.
    state_lib.write_trained(run_dir, step, seconds[label], env_steps, played)
    if result.stopped_by in ("SIGINT", "SIGTERM"):
      raise Interrupted(f"{result.stopped_by} while training {label}")
    score(s, step, env_steps, played, time.perf_counter() - t0)

  def score(s: RunSpec, step: int, env_steps: float, played: float, chunk_s: float) -> None:
    """Scores the run's latest checkpoint (at `step`), appends the row."""
    label, run_dir, config = s.label, os.path.join(out, s.label), configs[s.label]
    t1 = time.perf_counter()
    key = jax.random.fold_in(jax.random.PRNGKey(config.seed + 7919), step)
    if scoring is None:
      scores = score_checkpoint(run_dir, eval_games, key)
    else:
      scores = score_paper(run_dir, eval_games, key, scoring)
    row = {
      "label": label,
      "agent": s.agent,
      "seed": s.seed,
      "update_step": step,
      "env_steps": env_steps,
      "games": played,
      "train_s": seconds[label],
      "score_s": time.perf_counter() - t1,
      "chunk_s": chunk_s,
      **{k: float(v) for k, v in scores.items() if "/" in k},
    }
    state_lib.append_row(run_dir, row)
    how = None if command is None else command(s)
    point = _record(out, s, row, spec, config, commit=commit, command=how)
    records_lib.append(records or os.path.join(out, RECORDS_FILE), point)
    if on_record is not None:
      on_record(point)
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

  mine = [s for s in runs if train is None or s.label in train]
  if score_now:
    for s in mine:
      _score_as_is(s, rows[s.label], os.path.join(out, s.label), score, say)
    write_report(out, rows, budget, reference, title)
    return rows
  # The untrained agents first, then round robin over the schedule: at any
  # time every run has about the same budget behind it.
  try:
    _schedule(mine, rows, budget, configs, chunk, out, reference, title)
  except Interrupted as e:
    say(f"{e}: stopped; run the same command again to resume")
  return rows


def _score_as_is(s: RunSpec, rows, run_dir: str, score, say) -> None:
  """`compare(score_now=True)` for one run: scores its latest checkpoint
  where it is past the run's last point (`rows`), with the update step,
  env steps, seconds and games saved beside it (`compare_state`)."""
  from anakin_mz.runtime import checkpoint as ckpt

  steps = ckpt.steps(os.path.join(run_dir, "checkpoints"))
  last_step = int(rows[-1]["update_step"]) if rows else -1
  if not steps or steps[-1] <= last_step:
    say(f"[{s.label}] nothing to score: no checkpoint past its last scored point")
    return
  saved = state_lib.read_trained(run_dir)
  if saved is None or int(saved["update_step"]) != steps[-1] or "games" not in saved:
    raise ValueError(
      f"{run_dir}: its latest checkpoint (update {steps[-1]}) has no saved game count "
      f"({state_lib.TRAINED_FILE} is missing, older or of another step), so it cannot be "
      "scored as it is; run the command without --score-now to train to the next point"
    )
  say(f"[{s.label}] scoring its checkpoint at update {steps[-1]} ({saved['games']:.0f} games)")
  score(s, steps[-1], float(saved["env_steps"]), float(saved["games"]), 0.0)


def _budget_spec(budget: Budget) -> Dict[str, object]:
  """The budget as `compare.json` holds it: without `first` when it is 0,
  so comparisons written before it existed resume."""
  spec = dataclasses.asdict(budget)
  if not budget.first:
    del spec["first"]
  return spec


def _schedule(runs, rows, budget, configs, chunk, out, reference, title) -> None:
  def total_of(s: RunSpec) -> int:
    return configs[s.label].train.total_updates

  def advance(s: RunSpec, point: float) -> None:
    """Trains run `s` from its last scored point (or its start) to `point`
    of the budget's unit and scores it; nothing if it is there already."""
    last = rows[s.label][-1] if rows[s.label] else {}
    if budget.unit == "games":
      if last.get("games", 0.0) >= point or last.get("update_step", 0) >= total_of(s):
        return
      chunk(s, total_of(s), None, games=point)
    elif budget.unit == "env_steps":
      if last.get("env_steps", 0.0) >= point:
        return
      rate = _measured_rate(rows[s.label]) or env_steps_per_update(configs[s.label])
      need = math.ceil((point - last.get("env_steps", 0.0)) / rate)
      chunk(s, int(last.get("update_step", 0)) + max(1, need), None)
    else:
      trained = last.get("train_s", 0.0)
      if trained >= 60 * point - 1e-6 or last.get("update_step", 0) >= total_of(s):
        return  # this point reached, or the config's update budget spent
      chunk(s, total_of(s), point - trained / 60)

  for s in runs:
    if budget.first > 0:  # also a run scored short of it (`score_now` after a signal)
      advance(s, budget.first)
    elif not rows[s.label]:
      chunk(s, 0, None)
  write_report(out, rows, budget, reference, title)
  for point in budget.points():
    for s in runs:
      advance(s, point)
    write_report(out, rows, budget, reference, title)


def _measured_rate(rows: List[Dict[str, object]]) -> Optional[float]:
  """Env steps per update from the start to the last scored point (None
  before any update)."""
  if not rows or not rows[-1]["update_step"] > 0:
    return None
  return rows[-1]["env_steps"] / rows[-1]["update_step"]


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
    if diffs and _extends(old, spec):
      # A larger budget of the same unit and schedule extends the comparison.
      with open(path, "w", encoding="utf-8") as f:
        json.dump({**spec, "title": old.get("title", title)}, f, indent=1)
      return
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


def _extends(old: Mapping[str, object], new: Mapping[str, object]) -> bool:
  """Is `new` the comparison `old` with only a larger budget total?"""
  ob, nb = old.get("budget"), new.get("budget")
  if not (isinstance(ob, dict) and isinstance(nb, dict)):
    return False
  same = {k: v for k, v in old.items() if k not in ("budget", "title")}
  if same != {k: v for k, v in new.items() if k != "budget"}:
    return False
  return ob["unit"] == nb["unit"] and ob["every"] == nb["every"] and nb["total"] > ob["total"]


MERGED_SETTINGS = ("config", "overrides", "budget", "eval_games")


def _label(run: Mapping[str, object]) -> str:
  """The directory name of a run listed in a `compare.json`."""
  return RunSpec(run["agent"], run["seed"], tuple(run["overrides"]), run.get("name")).label


def merge(out: str, sources: Sequence[str]) -> Dict[str, object]:
  """One comparison in `out` over the runs of several (e.g. one per seed,
  each trained on its own core): `out/compare.json` lists every run, and
  `out/<label>` links to each run directory (absolute symbolic links; the
  runs stay where they are). The comparisons must share their settings
  (config, overrides, budget, eval games) and name each run once; a
  comparison of `FLAT_AGENTS` runs only (TD(lambda), drawn as a level) needs
  only the same game and eval games (its own config and budget: the paper
  trains it to its plateau). `out`
  may already hold the same merge, or a merge of some of these runs (it is
  written again); any other comparison there is refused. The runs are
  listed agent by agent (in order of first appearance), seeds ascending.
  Returns the spec.
  """
  if len(sources) < 2:
    raise ValueError(f"--merge needs at least two comparisons, got {len(sources)}")
  specs = [read_spec(src) for src in sources]

  def game(spec) -> str:  # the title's "<env> <params>"
    return str(spec.get("title", "")).rsplit(": ", 1)[0]

  def flat_only(spec) -> bool:
    return all(r["agent"] in FLAT_AGENTS for r in spec["runs"])

  # The settings come from the first comparison of searching agents.
  first = next((i for i, spec in enumerate(specs) if not flat_only(spec)), 0)
  base, base_src = specs[first], sources[first]

  def setting(spec, k):
    if k == "budget":  # where a run's scoring started does not change its points
      return {b: v for b, v in spec["budget"].items() if b != "first"}
    return game(spec) if k == "game" else spec.get(k)

  def differing(spec):  # the settings in which `spec` is not the base's
    keys = ("game", "eval_games") if flat_only(spec) and spec is not base else MERGED_SETTINGS
    return [k for k in keys if setting(spec, k) != setting(base, k)]

  for src, spec in zip(sources, specs):
    diffs = [
      f"{k}: {setting(base, k)!r} in {base_src!r}, {setting(spec, k)!r} there"
      for k in differing(spec)
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
  title = game(base)  # "<env> <params>: <agents>, seeds .."
  spec = {k: base[k] for k in MERGED_SETTINGS}
  spec.update(runs=runs, title=f"{title}: {','.join(agents)}, seeds {' '.join(map(str, seeds))}")
  with open(os.path.join(out, SPEC_FILE), "w", encoding="utf-8") as f:
    json.dump(spec, f, indent=1)
  return spec


def load_rows(out: str) -> Dict[str, List[Dict[str, object]]]:
  """{label: rows} of every run of the comparison in `out`."""
  spec = read_spec(out)
  labels = [_label(r) for r in spec["runs"]]
  return {label: read_rows(os.path.join(out, label)) for label in labels}
