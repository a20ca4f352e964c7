"""One experiment pipeline: a spec (base config, variants, seeds, budget,
evaluation) runs into run directories and appends one run record per
(variant, seed) (`records`), from which `tables` draws the results tables.
`anakin-mz experiment run SPEC` (`anakin_mz.cli.experiment`) is its command.

A spec is YAML:

    name: carchess_sweep          # the records' `experiment`
    env: carchess
    config: carchess              # optional: a shipped config or a path (from the spec's directory)
    overrides: []                 # every variant's
    seeds: [0]                    # every variant's, unless it names its own
    budget: {minutes: 15, updates: 5000}
    evaluation: {games: 1000, seed: 5, opponent: null, measure: score}
    target: {value: 61, source: "thesis MuZero"}   # optional: a bar (`target`)
    variants:
      base: []
      td10: [train.td_steps=10]
      rr4: {overrides: [train.replay_ratio=4, train.total_updates=10000], seeds: [0, 1]}
      gumbel: {overrides: [search.root=gumbel], note: "what this variant is"}

* budget: `minutes` caps each run's wall-clock (compilation included, as
  `anakin-mz train --minutes`); `updates` sets `train.total_updates` before
  the variant's overrides, so a variant's own wins.
* evaluation: `anakin-mz evaluate` on the last checkpoint (`checkpoints: N`:
  on each of the N newest, the games pooled, `--last-checkpoints`): `games`, `seed`
  (omitted or null: the run's training seed), `opponent` (a bot spec; null:
  the game's default), `player` (search, greedy, value), `extra_policies`,
  and for the tables `measure` (the figure a table reads: score, wdl.win,
  exact.greedy_vs_optimal, ...) and `model`, a label of the model a
  checkpoint spec evaluates: specs of one `name` that evaluate several
  models keep apart by it (the run directory
  `<runs>/<name>/<model>/<variant>_s<seed>`, a record per model; a table
  pivots on `evaluation.model`).
* target: the bar `evaluation.measure` must reach, `{value, source}`
  (`anakin_mz.experiments.target`): each record's `evaluation.target`, and
  the run ends with the report of the planned runs against it.
* a variant's `note`: what it is; its records' note, and in the report;
  its `player`: who plays its evaluation, instead of `evaluation.player`
  (one checkpoint spec scores several players: the search, the value head).
* `schedule`: rounds with a score between them, instead of a budget (`schedule`).
* `checkpoint: PATH-OR-NAME` instead of training: each variant evaluates
  that checkpoint with its `search.KEY=VALUE` overrides (no budget).
* `records`: where the records go (default `<runs>/<name>/records.jsonl`).

Each run is `<runs>/<name>/<variant>_s<seed>` (TensorBoard, checkpoints,
`train.json` once training ended, `eval.json`). Resumable: a (variant, seed)
with a record is skipped (unless `reevaluate`: its finished training is
evaluated again and its record replaced), a finished training is evaluated
without training again, and a run directory with checkpoints but no
`train.json` (an interrupted run) is an error: delete it to train again,
since a resumed run would not have the budget's wall-clock.

Seeds in one program (`together`, the CLI's `--seeds-together`; `choose`):
where a variant has two or more seeds to train (no record, no `train.json`,
no checkpoints), `auto` trains them as one study (`run.train_seeds`: one
compiled program with a seed axis, issue 64) when

* the budget has no `minutes` (the seeds of one program share its
  wall-clock: on a CPU 4 seeds make each step about 4x longer; an `updates`
  budget means the same in one program);
* the agent's step takes a seed axis (`capabilities.seed_axis`);
* the memory fits: the bytes of one learner's state (params, optimizer
  state, replay, self-play lanes: `study_memory.state_bytes`, from shapes alone) x the
  seeds x `study_memory.SAFETY` (the state in and out of a step, a stopped seed's
  copy, the step's temporaries) against the free memory (`study_memory.free_memory`:
  `MemAvailable` of /proc/meminfo on a CPU, `bytes_limit - bytes_in_use`
  summed over an accelerator's devices; unknown: one program).

`yes` trains them as one program wherever the agent can (a minutes budget
is then the study's, shared), `no` one after another. One line says which
and why: `[base] seeds 0 1 2: one program (est. 412 MiB of 20.3 GiB free host
memory)`. Each seed of a study still trains into its own
`<variant>_s<seed>` (`run.train_seeds(run_dirs=...)`) with its own
`train.json`, `eval.json` and record, the figures it would have made alone
(to float rounding); its record's `budget.train_minutes` is the study's
wall-clock, shared by the seeds (its `note` says so), and its command is
the `anakin-mz train --seeds ...` that makes the study (under
`<variant>_seeds_<S>_<T>/seed<S>`, where that command puts each seed) and
the evaluation of that seed there. An interrupted study leaves each seed's
run directory unfinished: the error above, for each.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shlex
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from anakin_mz.core import players
from anakin_mz.experiments import records as records_lib
from anakin_mz.experiments import schedule as schedule_lib, schedule_run
from anakin_mz.experiments import study_memory
from anakin_mz.experiments import target as target_lib

_KEYS = (
  "name",
  "env",
  "config",
  "overrides",
  "seeds",
  "budget",
  "evaluation",
  "variants",
  "checkpoint",
  "records",
  "target",
  "schedule",
)
# `run`'s `together`: whether a variant's seeds train as one program.
TOGETHER = ("auto", "yes", "no")

_EVAL_KEYS = (
  "games",
  "seed",
  "opponent",
  "player",
  "extra_policies",
  "measure",
  "model",
  "checkpoints",
)


@dataclasses.dataclass(frozen=True)
class Variant:
  name: str
  overrides: Tuple[str, ...]
  seeds: Tuple[int, ...]
  note: str = ""
  player: Optional[str] = None  # who plays its evaluation (None: evaluation.player)


@dataclasses.dataclass(frozen=True)
class Spec:
  """An experiment (see the module doc); paths are resolved."""

  name: str
  env: str
  config: Optional[str]
  overrides: Tuple[str, ...]
  variants: Tuple[Variant, ...]
  minutes: Optional[float] = None
  updates: Optional[int] = None
  evaluation: Mapping[str, object] = dataclasses.field(default_factory=dict)
  checkpoint: Optional[str] = None
  records: Optional[str] = None
  target: Optional[target_lib.Target] = None
  path: str = ""
  schedule: Optional[schedule_lib.Schedule] = None


def load(path: str) -> Spec:
  """The spec in the YAML file `path`.

  Raises:
    ValueError: an unreadable file, a missing or unknown key, a bad value
      (naming the file and the key).
  """
  from anakin_mz import config as config_lib

  raw = config_lib.read_yaml(path, "spec")
  if not isinstance(raw, Mapping):
    raise ValueError(f"spec {path!r} must hold a mapping")
  unknown = sorted(set(raw) - set(_KEYS))
  if unknown:
    raise ValueError(f"spec {path!r}: unknown key(s) {unknown}; valid: {', '.join(_KEYS)}")
  missing = [k for k in ("name", "env", "variants") if k not in raw]
  if missing:
    raise ValueError(f"spec {path!r}: missing key(s) {missing}")
  base = os.path.dirname(os.path.abspath(path))

  def relative(text):
    if text is None:
      return None
    candidate = os.path.normpath(os.path.join(base, str(text)))
    return candidate if os.path.exists(candidate) else str(text)

  seeds = _seeds(raw.get("seeds", [0]), f"spec {path!r}: seeds")
  variants = []
  if not isinstance(raw["variants"], Mapping) or not raw["variants"]:
    raise ValueError(f"spec {path!r}: variants must map names to override lists")
  for name, v in raw["variants"].items():
    where = f"spec {path!r}: variant {name!r}"
    own_seeds, note, player = seeds, "", None
    if isinstance(v, Mapping):
      bad = sorted(set(v) - {"overrides", "seeds", "note", "player"})
      if bad:
        raise ValueError(f"{where}: unknown key(s) {bad}; valid: overrides, seeds, note, player")
      if "seeds" in v:
        own_seeds = _seeds(v["seeds"], f"{where}: seeds")
      note = str(v.get("note") or "")
      player = _player(v.get("player"), f"{where}: player")
      v = v.get("overrides") or []
    if v is None:
      v = []
    if not isinstance(v, list) or not all(isinstance(o, str) and "=" in o for o in v):
      raise ValueError(f"{where}: overrides must be a list of KEY=VALUE, got {v!r}")
    variants.append(Variant(str(name), tuple(v), own_seeds, note, player))
  budget = raw.get("budget") or {}
  if not isinstance(budget, Mapping) or set(budget) - {"minutes", "updates"}:
    raise ValueError(f"spec {path!r}: budget takes minutes and updates, got {budget!r}")
  evaluation = dict(raw.get("evaluation") or {})
  if "agent" in evaluation:  # the old spelling, as evaluate's --agent
    raise ValueError(
      f"spec {path!r}: evaluation: agent is now player (search, greedy or value: who plays; "
      "`agent` names the learner, a config's)"
    )
  if "target" in evaluation:  # the value to reach is the spec's target, with its source
    raise ValueError(
      f"spec {path!r}: evaluation: target is now the spec's own key, "
      "target: {value: V, source: TEXT} (the bar evaluation.measure must reach)"
    )
  bad = sorted(set(evaluation) - set(_EVAL_KEYS))
  if bad:
    raise ValueError(
      f"spec {path!r}: evaluation: unknown key(s) {bad}; valid: {', '.join(_EVAL_KEYS)}"
    )
  _player(evaluation.get("player"), f"spec {path!r}: evaluation: player")
  model = evaluation.get("model")
  if model is not None and (
    not isinstance(model, str) or not model or not model.replace("_", "").replace("-", "").isalnum()
  ):
    raise ValueError(
      f"spec {path!r}: evaluation: model must be a label of letters, digits, _ and -, got {model!r}"
    )
  spec = Spec(
    name=str(raw["name"]),
    env=str(raw["env"]),
    config=relative(raw.get("config")),
    overrides=tuple(str(o) for o in raw.get("overrides") or ()),
    variants=tuple(variants),
    minutes=None if budget.get("minutes") is None else float(budget["minutes"]),
    updates=None if budget.get("updates") is None else int(budget["updates"]),
    evaluation=evaluation,
    checkpoint=relative(raw.get("checkpoint")),
    records=None if raw.get("records") is None else os.path.join(base, str(raw["records"])),
    target=None if raw.get("target") is None else target_lib.parse(raw["target"], f"spec {path!r}"),
    path=path,
    schedule=None
    if raw.get("schedule") is None
    else schedule_lib.parse(raw["schedule"], f"spec {path!r}"),
  )
  if spec.schedule is not None:
    schedule_lib.check_spec(spec)
  if spec.target is not None and not evaluation.get("measure"):
    raise ValueError(f"spec {path!r}: a target needs evaluation.measure, the figure to reach it")
  if spec.checkpoint is not None:
    if budget:
      raise ValueError(f"spec {path!r}: a checkpoint spec trains nothing: no budget")
    for v in spec.variants:
      bad = [o for o in v.overrides if not o.startswith("search.")]
      if bad:
        raise ValueError(
          f"spec {path!r}: variant {v.name!r}: a checkpoint spec's variants override the "
          f"search only (search.KEY=VALUE), got {bad}"
        )
  if spec.minutes is not None and spec.minutes <= 0:
    raise ValueError(f"spec {path!r}: budget minutes must be > 0")
  if int(evaluation.get("games", 1000)) < 1:
    raise ValueError(f"spec {path!r}: evaluation games must be >= 1")
  last = evaluation.get("checkpoints", 1)
  if isinstance(last, bool) or not isinstance(last, int) or last < 1:
    raise ValueError(
      f"spec {path!r}: evaluation checkpoints must be an integer >= 1 (the newest saved steps "
      f"to evaluate and pool), got {last!r}"
    )
  if last > 1 and (spec.checkpoint is not None or spec.schedule is not None):
    raise ValueError(
      f"spec {path!r}: evaluation checkpoints {last} pools a trained run's newest steps; "
      "a checkpoint spec or a schedule evaluates one step"
    )
  return spec


def _player(raw, where: str) -> Optional[str]:
  """A player's name (`anakin-mz evaluate --player`), None where unset."""
  if raw is None:
    return None
  if raw not in players.PLAYERS:
    raise ValueError(f"{where} must be one of {', '.join(players.PLAYERS)}, got {raw!r}")
  return str(raw)


def _seeds(raw, where: str) -> Tuple[int, ...]:
  if not isinstance(raw, list) or not raw or not all(isinstance(s, int) and s >= 0 for s in raw):
    raise ValueError(f"{where} must be a non-empty list of integers >= 0, got {raw!r}")
  return tuple(raw)


def plan(
  spec: Spec, variants: Optional[Sequence[str]] = None, seeds: Optional[Sequence[int]] = None
) -> List[Tuple[Variant, int]]:
  """The (variant, seed) runs: every variant's seeds, or those named."""
  known = [v.name for v in spec.variants]
  unknown = [n for n in variants or () if n not in known]
  if unknown:
    raise ValueError(f"unknown variant(s) {unknown}; the spec has {', '.join(known)}")
  chosen = [v for v in spec.variants if not variants or v.name in variants]
  return [(v, s) for v in chosen for s in (seeds or v.seeds)]


def overrides_of(spec: Spec, variant: Variant, seed: int) -> List[str]:
  """The config overrides of one run: the budget's updates, the spec's,
  the variant's (last: a variant's own wins), the seed."""
  out = [] if spec.updates is None else [f"train.total_updates={spec.updates}"]
  return out + list(spec.overrides) + list(variant.overrides) + [f"seed={seed}"]


def check(spec: Spec) -> None:
  """Loads every variant's config, so that a bad override fails before
  anything trains (naming the variant)."""
  from anakin_mz import config as config_lib

  for v in spec.variants:
    if spec.checkpoint is not None:
      continue
    try:
      config_lib.load_for_env(spec.env, spec.config, overrides_of(spec, v, v.seeds[0]))
    except ValueError as e:
      raise ValueError(f"variant {v.name!r}: {e}") from None


def run_dir(spec: Spec, runs: str, variant: Variant, seed: int) -> str:
  model = spec.evaluation.get("model")
  where = os.path.join(runs, spec.name) if model is None else os.path.join(runs, spec.name, model)
  return os.path.join(where, f"{variant.name}_s{seed}")


def train_command(
  spec: Spec, variant: Variant, seed: int, logdir: str, seeds: Sequence[int] = ()
) -> str:
  """The `anakin-mz train` command that trains this run; with `seeds`, the
  one that trains those seeds as one study (each under `<logdir>/seed<S>`)."""
  args = ["anakin-mz", "train", f"--env={spec.env}"]
  if spec.config is not None:
    config = records_lib.repo_path(spec.config) if os.path.isabs(spec.config) else spec.config
    args.append(f"--config={config}")
  if spec.minutes is not None:
    args.append(f"--minutes={spec.minutes:g}")
  args += ["--seeds", *map(str, seeds)] if seeds else [f"--seed={seed}"]
  args += [f"--logdir={logdir}", "--no-progress"]
  args += [o for o in overrides_of(spec, variant, seed) if not o.startswith("seed=")]
  return shlex.join(args)


def study_dir(spec: Spec, runs: str, variant: Variant, seeds: Sequence[int]) -> str:
  """Where `anakin-mz train --seeds` (a study's record's command) puts
  `variant`'s `seeds`: `<variant>_seeds_<S>_<T>...` beside the run
  directories (the driver itself trains each into `run_dir`)."""
  where = os.path.dirname(run_dir(spec, runs, variant, seeds[0]))
  return os.path.join(where, f"{variant.name}_seeds_{'_'.join(map(str, seeds))}")


def choose(
  spec: Spec, variant: Variant, seeds: Sequence[int], together: str = "auto"
) -> Tuple[bool, str]:
  """Whether `variant`'s `seeds` (two or more, none started) train as one
  program under `together` (`TOGETHER`), and why, in a few words (the
  module doc has the rule).

  Raises:
    ValueError: `together` not one of `TOGETHER`.
  """
  from anakin_mz import config as config_lib
  from anakin_mz.core import registry

  check_together(together)
  if together == "no":
    return False, "as asked: seeds together no"
  overrides = overrides_of(spec, variant, seeds[0])
  config, _, _ = config_lib.load_for_env(spec.env, spec.config, overrides)
  agent = registry.get(config.agent)
  if not agent.capabilities.seed_axis:
    return False, f"agent {agent.name!r} cannot (its step takes no seed axis)"
  if together == "yes":
    shared = "" if spec.minutes is None else f"; they share the {spec.minutes:g}-minute budget"
    return True, f"as asked: seeds together yes{shared}"
  if spec.minutes is not None:
    return False, (
      f"the {spec.minutes:g}-minute budget would be split among the seeds of one program; "
      "seeds together yes shares it"
    )
  need = study_memory.state_bytes(config) * len(seeds) * study_memory.SAFETY
  free, what = study_memory.free_memory()
  size = study_memory.size_text
  if free is None:
    return True, f"est. {size(need)}; {what}"
  if need > free:
    return False, f"would need est. {size(need)}, {size(free)} {what}"
  return True, f"est. {size(need)} of {size(free)} {what}"


def check_together(together: str) -> None:
  """Raises ValueError unless `together` is one of `TOGETHER`."""
  if together not in TOGETHER:
    raise ValueError(f"seeds together must be one of {', '.join(TOGETHER)}, got {together!r}")


def unstarted(logdir: str) -> bool:
  """Whether the run directory `logdir` holds no training, finished or not."""
  return not (
    os.path.exists(os.path.join(logdir, "train.json"))
    or os.path.isdir(os.path.join(logdir, "checkpoints"))
  )


def _eval_settings(spec: Spec, seed: int, variant: Variant) -> Dict[str, object]:
  ev = spec.evaluation
  return {
    "games": int(ev.get("games", 1000)),
    "seed": seed if ev.get("seed") is None else int(ev["seed"]),
    "opponent": ev.get("opponent"),
    "player": variant.player or str(ev.get("player", "search")),
    "extra_policies": None if ev.get("extra_policies") is None else list(ev["extra_policies"]),
    **({} if ev.get("model") is None else {"model": ev["model"]}),
    # Only where it pools: the records of one-step evaluations stay as written.
    **({} if int(ev.get("checkpoints", 1)) == 1 else {"checkpoints": int(ev["checkpoints"])}),
  }


def evaluate_command(spec: Spec, variant: Variant, seed: int, checkpoint: str, out: str) -> str:
  """The `anakin-mz evaluate` command that scores this run."""
  ev = _eval_settings(spec, seed, variant)
  args = ["anakin-mz", "evaluate", f"--checkpoint={checkpoint}", f"--games={ev['games']}"]
  args.append(f"--seed={ev['seed']}")
  if ev["opponent"] is not None:
    args.append(f"--opponent={ev['opponent']}")
  if ev["player"] != "search":
    args.append(f"--player={ev['player']}")
  if ev["extra_policies"] is not None:
    args.append(f"--extra-policies={','.join(ev['extra_policies'])}")
  if "checkpoints" in ev:
    args.append(f"--last-checkpoints={ev['checkpoints']}")
  args += [f"--search={o[len('search.') :]}" for o in _search_overrides(spec, variant)]
  return shlex.join(args + [f"--json={out}"])


def _search_overrides(spec: Spec, variant: Variant) -> List[str]:
  return list(variant.overrides) if spec.checkpoint is not None else []


def records_path(spec: Spec, runs: str) -> str:
  return spec.records or os.path.join(runs, spec.name, "records.jsonl")


def run(
  spec: Spec,
  runs: str,
  *,
  records: Optional[str] = None,
  variants: Optional[Sequence[str]] = None,
  seeds: Optional[Sequence[int]] = None,
  progress: bool = True,
  log: Callable[[str], None] = print,
  together: str = "auto",
  reevaluate: bool = False,
  **scheduled,
) -> List[records_lib.RunRecord]:
  """Trains and evaluates each planned run that has no record yet, appending
  its record to `records` (default `records_path`). Returns the new records.
  A variant's seeds to train run as one program or one after another as
  `together` (`TOGETHER`) and `choose` say (the module doc). With
  `reevaluate`, a run with a record is evaluated again (its training is not
  repeated) and its record replaced. A spec with a schedule runs on it
  (`schedule_run.run`, with `scheduled`'s options).

  Raises:
    ValueError: a bad override, an unknown variant, an interrupted run, a
      bad `together`, a recorded run to evaluate again without its training.
  """
  check_together(together)
  path = records or records_path(spec, runs)
  pairs = plan(spec, variants, seeds)
  check(spec)
  if spec.schedule is not None:
    where = dict(records=path, pairs=pairs, log=log, reevaluate=reevaluate)
    return schedule_run.run(spec, runs, **where, **scheduled)
  done = set()
  if os.path.exists(path):
    done = {
      (r.variant, r.seed, r.evaluation.get("model"))
      for r in records_lib.read(path)
      if r.experiment == spec.name
    }
  model = spec.evaluation.get("model")  # a label `load` checked
  new = []
  for _, group in itertools.groupby(pairs, key=lambda pair: pair[0].name):
    group = list(group)
    variant = group[0][0]
    fresh = [
      s
      for s in dict.fromkeys(s for _, s in group)
      if (variant.name, s, model) not in done and unstarted(run_dir(spec, runs, variant, s))
    ]
    if spec.checkpoint is None and len(fresh) >= 2:
      one, why = choose(spec, variant, fresh, together)
      how = "one program" if one else "one after another"
      log(f"[{variant.name}] seeds {' '.join(map(str, fresh))}: {how} ({why})")
      if one:
        _train_together(spec, runs, variant, fresh, progress, log)
    for _, seed in group:
      record = _run_one(spec, runs, variant, seed, done, path, progress, log, reevaluate)
      if record is not None:
        new.append(record)
  return new


def _run_one(spec, runs, variant, seed, done, path, progress, log, reevaluate=False):
  """Trains (unless trained) and evaluates one run and appends its record
  (`run`); None where it has a record already (unless `reevaluate`: then
  its record is replaced)."""
  from anakin_mz.eval import report

  key = (variant.name, seed, spec.evaluation.get("model"))
  logdir = run_dir(spec, runs, variant, seed)
  if key in done and not reevaluate:
    log(f"[{variant.name} seed {seed}] recorded already in {path}: skipped")
    return None
  if key in done and spec.checkpoint is None and not os.path.exists(f"{logdir}/train.json"):
    raise ValueError(
      f"{variant.name} seed {seed} is recorded, but {logdir!r} holds no finished training "
      "(train.json) to evaluate again"
    )
  os.makedirs(logdir, exist_ok=True)
  trained = _train(spec, variant, seed, logdir, progress, log)
  checkpoint = spec.checkpoint or os.path.join(logdir, "checkpoints")
  eval_json = os.path.join(logdir, "eval.json")
  settings = _eval_settings(spec, seed, variant)
  log(f"[{variant.name} seed {seed}] evaluating {settings['games']} games")
  result = report.evaluate_checkpoint(
    checkpoint,
    opponent=settings["opponent"],
    games=settings["games"],
    seed=settings["seed"],
    agent_kind=settings["player"],
    extra_policies=settings["extra_policies"],
    search_overrides=[o[len("search.") :] for o in _search_overrides(spec, variant)],
    last=settings.get("checkpoints"),
  )
  result = {k: v for k, v in result.items() if k != "dynamics_table"}
  with open(eval_json, "w", encoding="utf-8") as f:
    json.dump(result, f, indent=1)
  note = ""
  if trained and trained.get("seeds"):  # one seed of a study (`_train_together`)
    there = os.path.join(trained["study_dir"], f"seed{seed}")
    command = evaluate_command(
      spec, variant, seed, os.path.join(there, "checkpoints"), os.path.join(there, "eval.json")
    )
    note = (
      f"trained as one program with seeds {' '.join(map(str, trained['seeds']))} (the "
      f"command's {there}; the driver's {logdir}); train_minutes is their shared wall-clock"
    )
  else:
    command = evaluate_command(spec, variant, seed, checkpoint, eval_json)
  if trained:
    command = f"{trained['command']} && {command}"
  evaluation = {
    **settings,
    "measure": spec.evaluation.get("measure"),
    "target": None if spec.target is None else spec.target.value,
    "step": result.get("step"),
    **({"steps": [c["step"] for c in result["checkpoints"]]} if "checkpoints" in result else {}),
  }
  note = "; ".join(n for n in (variant.note, note) if n)
  record = records_lib.new(
    spec.name,
    variant.name,
    seed,
    command=command,
    overrides=overrides_of(spec, variant, seed)[:-1] if trained else variant.overrides,
    budget=records_lib.Budget(
      minutes=spec.minutes,
      updates=trained.get("updates", result.get("step")) if trained else result.get("step"),
      env_steps=trained.get("env_steps") if trained else None,
      train_minutes=trained["wall_s"] / 60 if trained else None,
    ),
    evaluation=evaluation,
    figures=records_lib.figures_of(result),
    note=note,
    # Where and when it trained; a checkpoint spec's: this evaluation's.
    **({k: trained.get(k) for k in ("device", "commit", "date")} if trained else {}),
  )
  if key in done:  # evaluated again: the new record replaces the old
    ident = (spec.name, *key)
    same = lambda r: (r.experiment, r.variant, r.seed, r.evaluation.get("model")) == ident
    records_lib.write(path, [r for r in records_lib.read(path) if not same(r)] + [record])
  else:
    records_lib.append(path, record)
  log(f"[{variant.name} seed {seed}] recorded in {path}")
  return record


def _train(spec: Spec, variant: Variant, seed: int, logdir: str, progress: bool, log):
  """Trains one run (unless `train.json` says it trained); returns what
  `train.json` holds, or None for a checkpoint spec."""
  if spec.checkpoint is not None:
    return None
  done = os.path.join(logdir, "train.json")
  if os.path.exists(done):
    with open(done, encoding="utf-8") as f:
      return json.load(f)
  if os.path.isdir(os.path.join(logdir, "checkpoints")):
    raise ValueError(
      f"{logdir!r} holds an unfinished run (checkpoints but no train.json); delete it to "
      "train this run again"
    )
  from anakin_mz import config as config_lib
  from anakin_mz.eval import periodic
  from anakin_mz.runtime import run as run_lib

  config, _, _ = config_lib.load_for_env(spec.env, spec.config, overrides_of(spec, variant, seed))
  command = train_command(spec, variant, seed, logdir)
  log(f"[{variant.name} seed {seed}] training: {command}")
  commit = records_lib.git_commit()  # the code that trains, not the checkout after it
  start = time.perf_counter()
  result = run_lib.train(
    config,
    logdir=logdir,
    max_minutes=spec.minutes,
    progress=progress,
    evaluate=periodic.evaluate,
  )
  if result.stopped_by in ("SIGINT", "SIGTERM"):
    raise ValueError(
      f"{result.stopped_by} stopped {logdir!r} before its budget; delete it and run the "
      "spec again (a resumed run would not have the budget's wall-clock)"
    )
  return _write_trained(logdir, result, time.perf_counter() - start, command, commit)


def _write_trained(logdir: str, result, wall_s: float, command: str, commit, **extra):
  """Writes and returns a finished run's `train.json`: its wall-clock,
  updates and env steps, the command, where and when it trained, and
  `extra` (a study's `seeds` and `study_dir`)."""
  import jax.numpy as jnp

  trained = {
    "wall_s": wall_s,
    "updates": result.saved_step or 0,
    "env_steps": float(jnp.sum(result.state.env_steps)),
    "command": command,
    "device": records_lib.device_note(),
    "commit": commit,
    "date": records_lib.today(),
    **extra,
  }
  records_lib.write_json(os.path.join(logdir, "train.json"), trained, indent=1)
  return trained


def _train_together(spec: Spec, runs: str, variant: Variant, seeds: Sequence[int], progress, log):
  """Trains `variant`'s `seeds` (none started) as one study, each into its
  `run_dir`, and writes each seed's `train.json` (`_train`'s, with the
  study's wall-clock and command, and `seeds`, `study_dir`)."""
  from anakin_mz import config as config_lib
  from anakin_mz.eval import periodic
  from anakin_mz.runtime import run as run_lib

  dirs = [run_dir(spec, runs, variant, s) for s in seeds]
  study = f"train.seeds=[{','.join(map(str, seeds))}]"
  overrides = overrides_of(spec, variant, seeds[0])[:-1] + [study]
  config, _, _ = config_lib.load_for_env(spec.env, spec.config, overrides)
  where = study_dir(spec, runs, variant, seeds)
  command = train_command(spec, variant, seeds[0], where, seeds)
  log(f"[{variant.name}] training seeds {' '.join(map(str, seeds))} as one program: {command}")
  log(f"[{variant.name}] (each seed into its run directory: {', '.join(dirs)})")
  commit = records_lib.git_commit()
  start = time.perf_counter()
  results = run_lib.train_seeds(
    config,
    logdir=os.path.dirname(dirs[0]),
    run_dirs=dirs,
    max_minutes=spec.minutes,
    progress=progress,
    evaluate=periodic.evaluate,
  )
  wall_s = time.perf_counter() - start
  if results[0].stopped_by in ("SIGINT", "SIGTERM"):
    raise ValueError(
      f"{results[0].stopped_by} stopped seeds {' '.join(map(str, seeds))} of "
      f"{variant.name!r} before their budget; delete {', '.join(map(repr, dirs))} and run "
      "the spec again (a resumed run would not have the budget's wall-clock)"
    )
  for logdir, result in zip(dirs, results):
    _write_trained(logdir, result, wall_s, command, commit, seeds=list(seeds), study_dir=where)
