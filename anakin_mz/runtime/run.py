"""The training run loop, written once: budget, progress bar, TensorBoard,
periodic evaluation, Orbax checkpoints, resume, signals and the NaN guard.
`anakin-mz train` (`anakin_mz.cli.train`) is a thin command line over `train`.

The periodic evaluation is handed in (`evaluate`, an `Evaluate`: the
command line, the experiments and `anakin_mz.train` hand in
`eval.periodic.evaluate`), so the runtime imports no evaluation; without
one, `train.eval_every` is not read and the run evaluates nothing.

How a run ends:
* the update budget or `--minutes` is reached: the final state is saved
  (once: a step that a periodic checkpoint already saved is not saved again);
  a `--minutes` stop between two periodic evaluations evaluates it first;
* SIGINT (Ctrl-C) or SIGTERM (preemption, `timeout`, a Colab disconnect):
  the current Anakin step finishes, the state is saved, and `train` returns
  normally with `RunResult.stopped_by` naming the signal. A second SIGINT
  interrupts at once (`KeyboardInterrupt`), still saving the last complete
  step. `--resume` continues exactly, from the newest checkpoint that reads
  back (a corrupt newer one is skipped with a warning line);
* a non-finite loss term, gradient norm or parameter: `NonFiniteError`. The
  bad chunk was not applied and nothing is saved after it, so the last
  periodic checkpoint is the last good state;
* a save fails (a full disk): `checkpoint.CheckpointError`, a ValueError;
  the checkpoints saved before it are intact.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import threading
import time
from typing import Callable, Dict, List, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from anakin_mz import config as config_lib
from anakin_mz.config import Config
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import console
from anakin_mz.runtime import metrics as metrics_lib
from anakin_mz.core import registry
from anakin_mz.runtime import seeds as seeds_lib
from anakin_mz.runtime import step_cache
from anakin_mz.runtime.step_cache import KEPT as _STEPS_KEPT  # noqa: F401 (tests read it)
from anakin_mz.runtime.step_cache import STEPS as _STEPS  # noqa: F401 (tests read it)
from anakin_mz.runtime.learner import BaseLearner
from anakin_mz.runtime.mesh import make_mesh, unaliased
from anakin_mz.runtime import summary
from anakin_mz.runtime.summary import SummaryWriter

# `evaluate(learner, params, key, num_games) -> metrics`: the periodic
# evaluation of `learner` (its `config`, `env` and `network`) with `params`
# (on one device) in `num_games` games, `train.eval_games`; its keys with a
# "/" are logged, and "eval/vs_random_score_mean" is the progress bar's
# (`eval.periodic.evaluate`, `console.eval_line`).
Evaluate = Callable[[BaseLearner, chex.ArrayTree, jax.Array, int], Dict[str, float]]


class NonFiniteError(RuntimeError):
  """Training produced a non-finite loss term, gradient norm or parameter."""


@dataclasses.dataclass
class RunResult:
  """What `train` returns: the final state (global arrays on the mesh) and
  the log.

  `stopped_by` is None when the update budget was reached, "minutes" for the
  wall-clock budget, "stop" where `train`'s `stop` ended it, or the signal
  ("SIGINT", "SIGTERM") that stopped it.
  `saved_step` is the update step of the last checkpoint (None if none).
  """

  state: object  # the learner's state (`anakin.TrainState`, ...)
  history: List[Dict[str, float]]
  evals: List[Dict[str, float]]
  checkpoint_dir: str
  stopped_by: Optional[str] = None
  saved_step: Optional[int] = None


class _StopSignals:
  """While active, SIGINT and SIGTERM request a clean stop instead of killing
  the process; a second SIGINT raises KeyboardInterrupt at once. A no-op off
  the main thread (Python delivers signals there only)."""

  def __init__(self, on_signal: Callable[[str], None]):
    self.requested: Optional[str] = None
    self._on_signal = on_signal
    self._previous: Dict[int, object] = {}

  def _handle(self, signum, frame):
    del frame
    name = signal.Signals(signum).name
    if self.requested == "SIGINT" and signum == signal.SIGINT:
      raise KeyboardInterrupt
    if self.requested is None:
      self.requested = name
      self._on_signal(name)

  def __enter__(self):
    if threading.current_thread() is threading.main_thread():
      for sig in (signal.SIGINT, signal.SIGTERM):
        self._previous[sig] = signal.signal(sig, self._handle)
    return self

  def __exit__(self, *exc):
    for sig, handler in self._previous.items():
      signal.signal(sig, handler)
    return False


def nonfinite_message(
  nonfinite: Dict[str, object],
  nonfinite_update: int,
  update_before: int,
  last_saved: Optional[int],
  checkpoint_dir: str,
) -> Optional[str]:
  """One line naming the update and the values that went non-finite, or None
  if the chunk's flags `nonfinite` (host values of a step's
  `StepMetrics.nonfinite`, with its `nonfinite_update`) are all False."""
  bad = sorted(k for k, v in nonfinite.items() if bool(v))
  if not bad:
    return None
  first = int(nonfinite_update)
  update = update_before + (first + 1 if first >= 0 else 1)
  kept = (
    f"the last good checkpoint is step {last_saved} in {checkpoint_dir}"
    if last_saved is not None
    else "no checkpoint was written"
  )
  return (
    f"non-finite values at update {update}: {', '.join(bad)}; the run stopped "
    f"and wrote nothing non-finite ({kept}). Lower train.learning_rate or "
    "train.max_grad_norm and start again"
  )


class _NoWriter:
  """The SummaryWriter of processes other than 0."""

  def scalars(self, step, values):
    pass

  def flush(self):
    pass

  def close(self):
    pass


def fit_devices(num_devices: int, config: Config) -> int:
  """The most devices, at most `num_devices`, that divide `config`'s global
  sizes (lanes, batch rows, reanalysed rows), or, for a study laid out
  `train.seed_layout=seeds` (whole seeds on each device, the learner's
  sizes unsplit), its number of seeds."""
  tc = config.train
  sizes = [tc.num_envs, tc.batch_size] + ([tc.reanalyse_rows] if tc.reanalyse_rows else [])
  if tc.seeds and tc.seed_layout == "seeds":
    sizes = [len(tc.seeds)]
  return max(d for d in range(1, num_devices + 1) if all(s % d == 0 for s in sizes))


def auto_mesh(config: Config) -> Mesh:
  """The mesh `--devices auto` trains on: the most of this process's
  devices (one per usable core on CPU, `host.configure`) that divide the
  run's sizes (`fit_devices`); every device of a multi-process run. (A
  study's layout on it: `seeds.choose_layout`.)"""
  devices = jax.devices()
  if jax.process_count() == 1:
    devices = devices[: fit_devices(len(devices), config)]
  return make_mesh(devices)


def _config_diff(a: Dict[str, object], b: Dict[str, object], prefix=""):
  diffs = []
  for k in sorted(set(a) | set(b)):
    va, vb = a.get(k), b.get(k)
    if isinstance(va, dict) and isinstance(vb, dict):
      diffs += _config_diff(va, vb, prefix + k + ".")
    elif va != vb:
      diffs.append(f"{prefix}{k}: checkpoint {vb!r} vs requested {va!r}")
  return diffs


def final_update(start: int, target: int, per_step: int) -> int:
  """The update count a run from update `start` stops at for a budget of
  `target` updates: each Anakin step makes `per_step` of them (the
  learner's `updates_per_chunk`), and the run steps until it reaches the
  target, so a target between two steps is passed by up to `per_step - 1`."""
  if start >= target:
    return start
  return start + -(-(target - start) // per_step) * per_step


@dataclasses.dataclass
class _Run:
  """One run's bookkeeping in the loop: `train`'s run, or one seed of
  `train_seeds`'s study (`index`: its place on the state's seed axis; None
  where the state has none)."""

  config: Config  # its own config (a study's seed: `seeds.single`)
  index: Optional[int]
  logdir: str
  checkpoint_dir: str
  label: str = ""  # what its console lines start with ("seed S: " in a study)
  writer: object = None
  eval_key: object = None
  saved_step: Optional[int] = None
  last_eval: int = 0
  last_ckpt: int = 0
  last_log: int = 0
  episodes: int = 0
  latest_eval: str = ""
  history: List[Dict[str, float]] = dataclasses.field(default_factory=list)
  evals: List[Dict[str, float]] = dataclasses.field(default_factory=list)

  def one(self, tree):
    """This run's part of `tree` (host values of the state or metrics)."""
    if self.index is None:
      return tree
    return jax.tree.map(lambda x: x[self.index], tree)

  def at(self, values: np.ndarray) -> int:
    """This run's entry of `values` (`[S]`, or `[1]` without a seed axis)."""
    return int(values[self.index or 0])


def train(
  config: Config,
  *,
  logdir: str,
  resume: bool = False,
  max_updates: Optional[int] = None,
  max_minutes: Optional[float] = None,
  progress: bool = True,
  checkpoint_dir: Optional[str] = None,
  mesh: Optional[Mesh] = None,
  on_step: Optional[Callable[[Dict[str, float]], None]] = None,
  stop: Optional[Callable[[Dict[str, float]], bool]] = None,
  evaluate: Optional[Evaluate] = None,
) -> RunResult:
  """Trains `config`'s agent (its learner, `registry.make_learner`) until
  `max_updates` updates (default `train.total_updates`) or `max_minutes` of
  wall-clock time, whichever comes first, on `mesh` (default: every device,
  `mesh.make_mesh`; `auto_mesh` fits it to the config). `on_step(row)` sees
  each step's history row as it comes; `stop(row)`, asked after each step,
  ends the run there when it says True (`stopped_by` "stop"; the step is
  checkpointed as at any end: a round of a round-based driver).
  `evaluate` is the periodic evaluation, every `train.eval_every` updates
  (`Evaluate`); None: none.

  Raises:
    ValueError: an unwritable logdir; checkpoints present without `resume`;
      `resume` with a checkpoint from another env or config; a study's
      config (`train.seeds`: `train_seeds` trains it).
  """
  if config.train.seeds:
    raise ValueError(
      f"the config is a study of seeds {list(config.train.seeds)} (train.seeds): "
      "run.train_seeds trains it"
    )
  loop = _Loop(config, logdir, mesh, max_updates, checkpoint_dir, evaluate)
  return loop.run(resume, max_minutes, progress, on_step, stop)[0]


def train_seeds(
  config: Config,
  *,
  logdir: str,
  resume: bool = False,
  max_updates: Optional[int] = None,
  max_minutes: Optional[float] = None,
  progress: bool = True,
  mesh: Optional[Mesh] = None,
  evaluate: Optional[Evaluate] = None,
  run_dirs: Optional[List[str]] = None,
) -> List[RunResult]:
  """Trains the study of `config.train.seeds`: each seed S the run `train`
  makes of `seeds.single(config, S)`, all of them as one compiled program
  (`seeds.SeedAxis`: the learner's state and step with a leading seed
  axis), each with its own TensorBoard scalars, evaluations and checkpoints
  under `<logdir>/seed<S>` (`seeds.run_dirs`), which `evaluate`, `export`
  and a single run's `resume` read as any run's; `run_dirs` (one per seed,
  in `train.seeds` order) puts them elsewhere (`anakin-mz experiment run`:
  `<variant>_s<seed>`). `resume` continues every seed from its own newest
  checkpoint (a seed without one starts afresh).

  The seeds stop together on `max_minutes` or a signal; a seed that reaches
  the update budget first keeps its state there while the others step on.
  A non-finite value in any seed stops the study (`NonFiniteError` naming
  the seed), as it stops a run.

  On several devices the study lies on `mesh` as `train.seed_layout` says
  (`seeds.choose_layout`: whole seeds on each device, or each seed's lanes
  split over them); the numbers are the same in either.

  Returns:
    One `RunResult` per seed, in `train.seeds` order; its `state` is that
    seed's alone (`seeds.SeedAxis.take`: the learner's layout, or in the
    `seeds` layout a copy on each device).

  Raises:
    ValueError: as `train`; a config without `train.seeds`; `run_dirs` not
      one per seed; `train.seed_layout=seeds` with seeds that do not divide
      over the devices.
  """
  if not config.train.seeds:
    raise ValueError("train_seeds needs a study's config (train.seeds); run.train trains one run")
  if run_dirs is not None and len(run_dirs) != len(config.train.seeds):
    raise ValueError(
      f"run_dirs: {len(run_dirs)} directories for seeds {list(config.train.seeds)}; "
      "give one per seed"
    )
  loop = _Loop(config, logdir, mesh, max_updates, None, evaluate, run_dirs)
  return loop.run(resume, max_minutes, progress, None, None)


def _check_resumable(config: Config, env, directory: str, meta: Dict[str, object]) -> None:
  """Raises ValueError where a checkpoint's `meta` is not `config`'s run."""
  ckpt.check_compatible(meta, directory, env_id=env.id, env_version=env.version)
  ckpt.check_format(meta, directory)
  try:
    saved_config = config_lib.from_saved(meta["config"]).to_dict()
  except config_lib.OlderLayout as e:
    raise ckpt.older_format(directory, str(e)) from None
  except ValueError:  # a config this code rejects: the diff names the keys
    saved_config = meta["config"]
  diffs = _config_diff(config.to_dict(), saved_config)
  if diffs:
    raise ValueError(
      f"checkpoint {directory!r} was made with another config:\n  " + "\n  ".join(diffs)
    )


class _Loop:
  """The run loop of `train` (one run) and `train_seeds` (a study): the
  learner, the state (a study's with its seed axis) and each run's
  bookkeeping (`_Run`); `run` steps it to the end."""

  def __init__(self, config, logdir, mesh, max_updates, checkpoint_dir, evaluate, run_dirs=None):
    try:
      os.makedirs(logdir, exist_ok=True)
    except OSError as e:
      raise ValueError(f"cannot create logdir {logdir!r}: {e}") from None
    if not os.access(logdir, os.W_OK):
      raise ValueError(f"logdir {logdir!r} is not writable")
    tc = config.train
    self.config = config
    self.evaluate = evaluate
    # Updates between evaluations: none without an evaluation to run.
    self.eval_every = tc.eval_every if evaluate is not None else 0
    self.target = tc.total_updates if max_updates is None else max_updates
    if tc.seeds:
      self.study = seeds_lib.make_study(config, mesh)  # its layout: `seeds.choose_layout`
      self.learner = self.study.learner
      self.env = self.learner.env
      dirs = run_dirs or seeds_lib.run_dirs(logdir, config)
      self.runs = [
        _Run(seeds_lib.single(config, s), i, d, os.path.join(d, "checkpoints"), f"seed {s}: ")
        for i, (s, d) in enumerate(zip(tc.seeds, dirs))
      ]
      self.state = self.study.init_sharded(tc.seeds)
    else:
      self.study = None
      self.learner = registry.make_learner(config, mesh)
      self.env = self.learner.env
      checkpoint_dir = checkpoint_dir or os.path.join(logdir, "checkpoints")
      self.runs = [_Run(config, None, logdir, checkpoint_dir)]
      self.state = self.learner.init_sharded(config.seed)

  def steps(self) -> np.ndarray:
    """int `[S]` (`[1]` for one run): the update step of each run."""
    return np.atleast_1d(np.asarray(jax.device_get(self.state.update_step)))

  def state_of(self, run: _Run):
    """`run`'s own state (a study's seed: `SeedAxis.take`'s)."""
    return self.state if run.index is None else self.study.take(self.state, run.index)

  def restore(self, resume: bool) -> bool:
    """Resumes each run from its newest readable checkpoint; returns whether
    any run had one. Raises ValueError for checkpoints without `resume`."""
    saved = [ckpt.steps(run.checkpoint_dir) for run in self.runs]
    for run, steps in zip(self.runs, saved):
      if steps and not resume:
        raise ValueError(
          f"{run.checkpoint_dir!r} already holds checkpoints (steps "
          f"{list(steps)}); pass --resume to continue, or another --logdir"
        )
    if not any(saved):
      return False
    states = []
    for run, steps in zip(self.runs, saved):
      if not steps:  # a study's seed that saved nothing yet starts afresh
        states.append(self.state_of(run))
        continue
      check = functools.partial(_check_resumable, run.config, self.env, run.checkpoint_dir)
      # The saved state is global: it restores onto this run's mesh, whatever
      # the device count it was saved on. A newest step that does not read
      # back (a corrupt file) gives way to the newest one that does.
      # A study's seed restores laid out as `take` gives it (its layout's).
      if self.study is None:
        abstract = self.learner.abstract_state()
      else:
        abstract = self.study.seed_abstract_state()
      state, _ = ckpt.restore_latest_readable(run.checkpoint_dir, abstract, check)
      states.append(state)
      run.saved_step = int(state.update_step)
    self.state = states[0] if self.study is None else self.study.stack(states)
    return True

  def save(self, run: _Run) -> None:
    """Saves `run`'s current state, once per step."""
    step = run.at(self.steps())
    if step == run.saved_step:
      return
    meta = ckpt.make_metadata(run.config.to_dict(), self.env.id, self.env.version, step)
    meta.update(num_devices=self.learner.num_devices, state_layout=ckpt.STATE_LAYOUT)
    ckpt.save(run.checkpoint_dir, step, self.state_of(run), meta)
    run.saved_step = step

  def run(self, resume, max_minutes, progress, on_step, stop) -> List[RunResult]:
    tc, env, learner, runs, target = (
      self.config.train,
      self.env,
      self.learner,
      self.runs,
      self.target,
    )
    self.restore(resume)
    # Multi-process runs: every process steps and saves (its shards); process 0
    # alone logs and shows the progress bar.
    # The wall-clock budget (--minutes) counts compilation, as a user's clock does.
    start = time.perf_counter()
    # The step donates the state it is given (`OnMesh.jit_step`), which must
    # hold no buffer twice.
    self.state = unaliased(self.state)
    step_fn = step_cache.compiled_step(self.study or learner, self.state)
    lead = jax.process_index() == 0
    first = self.steps()
    for run in runs:
      run.writer = SummaryWriter(run.logdir) if lead else _NoWriter()
      run.eval_key = jax.random.PRNGKey(run.config.seed + 7919)
      run.last_eval = run.last_ckpt = run.last_log = run.at(first)

    per_step = getattr(learner, "updates_per_chunk", 1)
    last = final_update(int(first.min()), target, per_step)
    if last != target and last > int(first.min()) and lead:
      print(
        f"note: each step makes {per_step} updates (a self-play chunk, "
        f"then its gradient updates), so the run stops at update {last}, not {target}",
        flush=True,
      )

    bar = None
    if progress and lead:
      from tqdm import tqdm

      desc = env.id if self.study is None else f"{env.id} x{len(runs)} seeds"
      bar = tqdm(total=target, initial=int(first.min()), unit="upd", dynamic_ncols=True, desc=desc)

    def say(line: str):
      if bar is not None:
        bar.write(line)
      elif lead:
        print(line, flush=True)

    sims = self.config.search.num_simulations
    stopped_by: Optional[str] = None

    def run_eval(run: _Run, step: int, env_steps: float, wall_s: float) -> Dict[str, float]:
      """Evaluates `run`'s current params, logs every metric with the x axes
      (env steps and wall-clock at this evaluation: exact where no row is
      logged, and 0 env steps for the untrained agent) and prints one short
      line of the headline metrics (`console.eval_line`)."""
      run.eval_key, k = jax.random.split(run.eval_key)
      # The evaluation games run on one device (params are replicated; the host
      # copy also works for arrays spread over several processes).
      params = run.one(jax.device_get(self.state.params))
      params = jax.device_put(params, jax.local_devices()[0])
      result = self.evaluate(learner, params, k, tc.eval_games)
      result.update(update_step=step, env_steps=env_steps, wall_s=wall_s)
      run.evals.append(result)
      logged = {k2: v for k2, v in result.items() if "/" in k2}
      logged.update({summary.ENV_STEPS: env_steps, summary.WALL: wall_s})
      run.writer.scalars(step, logged)
      say(run.label + console.eval_line(result, env))
      return result

    signals = _StopSignals(
      lambda name: say(
        f"{name}: stopping after this step and saving a checkpoint "
        "(press Ctrl-C again to stop at once)"
      )
    )
    in_flight = None  # a step's (state, metrics) until they are checked and kept
    old = None  # a study's state before the step, while some seeds stand still
    try:
      with signals:
        for run in runs:
          if self.eval_every and run.last_eval == 0:
            run_eval(run, 0, 0.0, time.perf_counter() - start)  # the untrained agent
        while signals.requested is None:
          before = self.steps()
          active = before < target
          if not active.any():
            break
          t0 = time.perf_counter()
          # A study whose seeds stop apart keeps the stopped seeds' state:
          # a copy, as the step deletes the state it is given.
          old = None if active.all() else jax.tree.map(jnp.copy, self.state)
          in_flight = step_fn(self.state)  # self.state is deleted from here on ...
          new_state, metrics = in_flight
          metrics = jax.device_get(metrics)
          for run in runs:
            if active[run.index or 0]:
              mine = run.one(metrics)
              bad = nonfinite_message(
                mine.nonfinite,
                mine.nonfinite_update,
                run.at(before),
                run.saved_step,
                run.checkpoint_dir,
              )
              if bad is not None:
                raise NonFiniteError(run.label + bad)
          if not active.all():  # the seeds at the budget stay there
            new_state = self.study.keep(active, new_state, old)
          self.state = new_state  # ... to here
          in_flight = None
          dt = max(time.perf_counter() - t0, 1e-9)  # a coarse clock can read 0
          steps = self.steps()
          env_steps = np.atleast_1d(np.asarray(jax.device_get(self.state.env_steps)))
          rows = []
          for run in runs:
            if not active[run.index or 0]:
              continue
            mine, step = run.one(metrics), run.at(steps)
            run.episodes += int(mine.episodes)
            row = metrics_lib.row(mine, dt, sims)
            row["env_steps"] = float(run.at(env_steps))
            row["update_step"] = step
            row["wall_s"] = time.perf_counter() - start
            run.history.append(row)
            rows.append(row)
            if on_step is not None:
              on_step(row)
            if step - run.last_log >= tc.log_every or step >= target:
              run.writer.scalars(step, {summary.tag(k): v for k, v in row.items()})
              run.last_log = step
            if (
              self.eval_every
              and signals.requested is None
              and (step - run.last_eval >= self.eval_every or step >= target)
            ):
              result = run_eval(run, step, row["env_steps"], row["wall_s"])
              run.latest_eval = f"{result['eval/vs_random_score_mean']:+.2f}"
              run.last_eval = step
            if tc.checkpoint_every and step - run.last_ckpt >= tc.checkpoint_every:
              self.save(run)
              run.last_ckpt = step
            run.writer.flush()
          if bar is not None:
            bar.n = min(int(steps.min()), target)
            bar.set_postfix(
              env_steps=f"{float(env_steps.sum()):.0f}",
              games=sum(run.episodes for run in runs),
              steps_s=f"{sum(row[summary.ENV_STEPS_PER_S] for row in rows):.0f}",
              eval="/".join(run.latest_eval or "-" for run in runs),
              refresh=False,
            )
            bar.refresh()
          # Checked after a step, so a budget spent compiling still makes one.
          if max_minutes is not None and time.perf_counter() - start > 60 * max_minutes:
            stopped_by = "minutes"
            break
          if stop is not None and any(stop(row) for row in rows):
            stopped_by = "stop"
            break
        stopped_by = signals.requested or stopped_by
        steps = self.steps()
        for run in runs:
          if (
            stopped_by == "minutes"
            and self.eval_every
            and run.history
            and run.last_eval != run.at(steps)
          ):
            # The wall-clock budget ends between evaluations: score what it
            # reached (a signal, by contrast, asks to stop soon: no evaluation).
            last_row = run.history[-1]
            run_eval(run, run.at(steps), last_row["env_steps"], last_row["wall_s"])
        for run in runs:
          self.save(run)
    except KeyboardInterrupt:
      # A second Ctrl-C. Until a step's call returns the state is the last
      # complete step; after it (the old state donated and deleted) the step
      # in flight is, saved only if it wrote nothing non-finite.
      stopped_by = "SIGINT"
      save = True
      if in_flight is not None and any(x.is_deleted() for x in jax.tree.leaves(self.state)):
        new_state, metrics = in_flight
        metrics = jax.device_get(metrics)
        save = not any(any(map(bool, run.one(metrics).nonfinite.values())) for run in runs)
        self.state = new_state if old is None else self.study.keep(active, new_state, old)
      if save:
        say("interrupted: saving the last complete step")
        for run in runs:
          self.save(run)
      else:
        say("interrupted during a step that went non-finite: nothing saved")
    finally:
      for run in runs:
        if run.writer is not None:
          run.writer.close()
      if bar is not None:
        bar.close()
    return [
      RunResult(
        state=self.state_of(run),
        history=run.history,
        evals=run.evals,
        checkpoint_dir=run.checkpoint_dir,
        stopped_by=stopped_by,
        saved_step=run.saved_step,
      )
      for run in runs
    ]
