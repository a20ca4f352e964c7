"""The training run loop, written once: budget, progress bar, TensorBoard,
periodic evaluation, Orbax checkpoints, resume, signals and the NaN guard.
`anakin-mz train` (`anakin_mz.cli.train`) is a thin command line over `train`.

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

import collections
import dataclasses
import functools
import json
import os
import signal
import threading
import time
from typing import Callable, Dict, List, Optional

import jax
from jax.sharding import Mesh

import envs.bots
from anakin_mz import config as config_lib
from anakin_mz.config import Config
from anakin_mz.eval import dynamics, match
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import console
from anakin_mz.runtime import metrics as metrics_lib
from anakin_mz.runtime import registry
from anakin_mz.runtime.learner import BaseLearner
from anakin_mz.runtime.mesh import make_mesh
from anakin_mz.runtime import summary
from anakin_mz.runtime.summary import SummaryWriter


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


@functools.lru_cache(maxsize=4)
def _match_vs_random(agent, num_games: int):
  """The jitted match `(params, key) -> MatchResult` of the greedy search
  agent (`AgentSpec.search_policy`) against uniform random: params are an
  argument, so it compiles once per learner (or restored agent) and game
  count (a closure over each evaluation's params compiled it again every
  time, ~8 s of each ~13 s Nannon evaluation)."""
  env, spec = agent.env, registry.get(agent.config.agent)

  def play(params, key):
    player = spec.search_policy(agent.network, params, env, agent.config.search)
    return match.play_match(env, player, envs.random_policy, key, num_games)

  return jax.jit(play)


def evaluate(agent, params, key, num_games: int) -> Dict[str, float]:
  """The run loop's evaluation of `agent` (a learner or a restored agent:
  its `config`, `env` and `network`) with `params`: its greedy player vs
  uniform random, all games on device; then the game's extra evaluators
  (`envs.bots.evaluators`) on its greedy network policy, and where its
  model has NDMZ's heads the NDMZ paper's dynamics tests
  (`dynamics/<metric>_k<depth>`)."""
  env, spec = agent.env, registry.get(agent.config.agent)
  result = _match_vs_random(agent, num_games)(params, key)
  out = {f"eval/vs_random_{k}": v for k, v in match.summarize(result).items()}
  greedy = {"greedy": spec.greedy(agent.network, params)}
  for evaluator in envs.bots.evaluators(env.id):
    scores = evaluator.score(env, greedy, key)
    out.update({f"{evaluator.name}/{k}": v for k, v in scores.items()})
  if spec.capabilities.dynamics_tests:
    out.update(dynamics.learner_hook(agent, params))
  return out


def fit_devices(num_devices: int, config: Config) -> int:
  """The most devices, at most `num_devices`, that divide `config`'s global
  sizes (lanes, batch rows, reanalysed rows)."""
  tc = config.train
  sizes = [tc.num_envs, tc.batch_size] + ([tc.reanalyse_rows] if tc.reanalyse_rows else [])
  return max(d for d in range(1, num_devices + 1) if all(s % d == 0 for s in sizes))


def auto_mesh(config: Config) -> Mesh:
  """The mesh `--devices auto` trains on: the most of this process's
  devices (one per usable core on CPU, `host.configure`) that divide the
  run's sizes (`fit_devices`); every device of a multi-process run."""
  devices = jax.devices()
  if jax.process_count() == 1:
    devices = devices[: fit_devices(len(devices), config)]
  return make_mesh(devices)


# The steps this process compiled, newest last, by what makes the program:
# a learner is a pure function of its class, its config and its mesh, so a
# later `train` of an equal config on the same mesh (the next chunk of
# `compare`, a resumed run in a notebook) reuses the step instead of tracing
# it again, which alone takes seconds. The learner's `step` and `local_step`
# are in the key, so a method replaced at run time (a test's probe) is
# traced; so are the JAX settings that change the compiled program.
_STEPS: "collections.OrderedDict[tuple, jax.stages.Compiled]" = collections.OrderedDict()
_STEPS_KEPT = 4
_COMPILE_SETTINGS = (
  "jax_disable_most_optimizations",
  "jax_enable_x64",
  "jax_default_matmul_precision",
)
# Settings of the loop around the step (this module reads them; no learner
# does), left out of the key so that runs differing only in when they
# evaluate, checkpoint or log share a step.
_LOOP_ONLY = ("eval_every", "eval_games", "checkpoint_every", "log_every")


def _step_key(learner: BaseLearner, state) -> tuple:
  cls = type(learner)
  leaves, tree = jax.tree.flatten(state)
  config = learner.config.to_dict()
  config["train"] = {k: v for k, v in config["train"].items() if k not in _LOOP_ONLY}
  return (
    cls,
    getattr(cls, "step", None),
    getattr(cls, "local_step", None),
    json.dumps(config, sort_keys=True, default=str),
    tuple(learner.mesh.devices.flat),
    tuple(learner.mesh.axis_names),
    tuple(jax.config.values[name] for name in _COMPILE_SETTINGS),
    tree,
    tuple((x.shape, str(x.dtype), getattr(x, "sharding", None)) for x in leaves),
  )


def _compiled_step(learner: BaseLearner, state):
  """`learner.jit_step` compiled for `state` (or this process's earlier
  compilation of the same program, `_STEPS`); in a multi-process run,
  compiled afresh, once every process has compiled it. (The CPU collectives
  of several processes give a peer 30 s to reach the first collective;
  compile times differ by more than that on a loaded host, so the processes
  meet at the coordination service's barrier, which waits as long as
  compiling takes, first.)"""
  key = _step_key(learner, state) if jax.process_count() == 1 else None
  if key in _STEPS:
    _STEPS.move_to_end(key)
    return _STEPS[key]
  step = learner.jit_step.lower(state).compile()
  if key is not None:
    _STEPS[key] = step
    while len(_STEPS) > _STEPS_KEPT:
      _STEPS.popitem(last=False)
  if jax.process_count() > 1:
    from jax._src import (
      distributed,
    )  # the coordination client; no public barrier without a collective

    distributed.global_state.client.wait_at_barrier("anakin_mz_step_compiled", 60 * 60 * 1000)
  return step


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
) -> RunResult:
  """Trains `config`'s agent (its learner, `registry.make_learner`) until
  `max_updates` updates (default `train.total_updates`) or `max_minutes` of
  wall-clock time, whichever comes first, on `mesh` (default: every device,
  `mesh.make_mesh`; `auto_mesh` fits it to the config). `on_step(row)` sees
  each step's history row as it comes; `stop(row)`, asked after each step,
  ends the run there when it says True (`stopped_by` "stop"; the step is
  checkpointed as at any end: a round of a round-based driver).

  Raises:
    ValueError: an unwritable logdir; checkpoints present without `resume`;
      `resume` with a checkpoint from another env or config.
  """
  try:
    os.makedirs(logdir, exist_ok=True)
  except OSError as e:
    raise ValueError(f"cannot create logdir {logdir!r}: {e}") from None
  if not os.access(logdir, os.W_OK):
    raise ValueError(f"logdir {logdir!r} is not writable")
  checkpoint_dir = checkpoint_dir or os.path.join(logdir, "checkpoints")
  tc = config.train
  target = tc.total_updates if max_updates is None else max_updates

  learner = registry.make_learner(config, mesh)
  env = learner.env
  state = learner.init_sharded(config.seed)
  num_devices = learner.num_devices
  saved = ckpt.steps(checkpoint_dir)
  if saved and not resume:
    raise ValueError(
      f"{checkpoint_dir!r} already holds checkpoints (steps "
      f"{list(saved)}); pass --resume to continue, or another --logdir"
    )
  if resume and saved:

    def check(meta):
      ckpt.check_compatible(meta, checkpoint_dir, env_id=env.id, env_version=env.version)
      try:  # a config saved in an older layout compares in today's
        saved_config = config_lib.from_saved(meta["config"]).to_dict()
      except ValueError:
        saved_config = meta["config"]
      diffs = _config_diff(config.to_dict(), saved_config)
      if diffs:
        raise ValueError(
          f"checkpoint {checkpoint_dir!r} was made with another config:\n  " + "\n  ".join(diffs)
        )
      ckpt.check_resumable(meta, checkpoint_dir)

    # The saved state is global: it restores onto this run's mesh, whatever
    # the device count it was saved on. A newest step that does not read
    # back (a corrupt file) gives way to the newest one that does.
    state, _ = ckpt.restore_latest_readable(checkpoint_dir, learner.abstract_state(), check)

  # Multi-process runs: every process steps and saves (its shards); process 0
  # alone logs and shows the progress bar.
  # The wall-clock budget (--minutes) counts compilation, as a user's clock does.
  start = time.perf_counter()
  step_fn = _compiled_step(learner, state)
  lead = jax.process_index() == 0
  writer = SummaryWriter(logdir) if lead else _NoWriter()
  saved_step: Optional[int] = int(state.update_step) if saved else None

  def current_step() -> int:
    return int(state.update_step)

  def save():
    """Saves the current state, once per step."""
    nonlocal saved_step
    step = current_step()
    if step == saved_step:
      return
    meta = ckpt.make_metadata(config.to_dict(), env.id, env.version, step)
    meta.update(num_devices=num_devices, state_layout=ckpt.STATE_LAYOUT)
    ckpt.save(checkpoint_dir, step, state, meta)
    saved_step = step

  last = final_update(current_step(), target, getattr(learner, "updates_per_chunk", 1))
  if last != target and last > current_step() and lead:
    print(
      f"note: each step makes {learner.updates_per_chunk} updates (a self-play chunk, "
      f"then its gradient updates), so the run stops at update {last}, not {target}",
      flush=True,
    )

  bar = None
  if progress and lead:
    from tqdm import tqdm

    bar = tqdm(total=target, initial=current_step(), unit="upd", dynamic_ncols=True, desc=env.id)

  def say(line: str):
    if bar is not None:
      bar.write(line)
    elif lead:
      print(line, flush=True)

  history: List[Dict[str, float]] = []
  evals: List[Dict[str, float]] = []
  eval_key = jax.random.PRNGKey(config.seed + 7919)
  last_eval = last_ckpt = last_log = current_step()
  episodes = 0
  latest_eval = ""
  sims = config.search.num_simulations
  stopped_by: Optional[str] = None

  def run_eval(step: int, env_steps: float, wall_s: float) -> Dict[str, float]:
    """Evaluates the current params, logs every metric with the x axes
    (env steps and wall-clock at this evaluation: exact where no row is
    logged, and 0 env steps for the untrained agent) and prints one short
    line of the headline metrics (`console.eval_line`)."""
    nonlocal eval_key
    eval_key, k = jax.random.split(eval_key)
    # The evaluation games run on one device (params are replicated; the host
    # copy also works for arrays spread over several processes).
    params = jax.device_put(jax.device_get(state.params), jax.local_devices()[0])
    result = evaluate(learner, params, k, tc.eval_games)
    result.update(update_step=step, env_steps=env_steps, wall_s=wall_s)
    evals.append(result)
    logged = {k2: v for k2, v in result.items() if "/" in k2}
    logged.update({summary.ENV_STEPS: env_steps, summary.WALL: wall_s})
    writer.scalars(step, logged)
    say(console.eval_line(result, env))
    return result

  signals = _StopSignals(
    lambda name: say(
      f"{name}: stopping after this step and saving a checkpoint "
      "(press Ctrl-C again to stop at once)"
    )
  )
  try:
    with signals:
      if tc.eval_every and last_eval == 0:
        run_eval(0, 0.0, time.perf_counter() - start)  # the untrained agent
      while current_step() < target and signals.requested is None:
        t0 = time.perf_counter()
        before = current_step()
        new_state, metrics = step_fn(state)
        metrics = jax.device_get(metrics)
        bad = nonfinite_message(
          metrics.nonfinite, metrics.nonfinite_update, before, saved_step, checkpoint_dir
        )
        if bad is not None:
          raise NonFiniteError(bad)
        state = new_state
        dt = max(time.perf_counter() - t0, 1e-9)  # a coarse clock can read 0
        step = current_step()
        episodes += int(metrics.episodes)
        row = metrics_lib.row(metrics, dt, sims)
        row["env_steps"] = float(state.env_steps)
        row["update_step"] = step
        row["wall_s"] = time.perf_counter() - start
        history.append(row)
        if on_step is not None:
          on_step(row)
        if step - last_log >= tc.log_every or step >= target:
          writer.scalars(step, {summary.tag(k): v for k, v in row.items()})
          last_log = step
        if (
          tc.eval_every
          and signals.requested is None
          and (step - last_eval >= tc.eval_every or step >= target)
        ):
          result = run_eval(step, row["env_steps"], row["wall_s"])
          latest_eval = f"{result['eval/vs_random_score_mean']:+.2f}"
          last_eval = step
        if tc.checkpoint_every and step - last_ckpt >= tc.checkpoint_every:
          save()
          last_ckpt = step
        writer.flush()
        if bar is not None:
          bar.n = min(step, target)
          bar.set_postfix(
            env_steps=f"{row['env_steps']:.0f}",
            games=episodes,
            steps_s=f"{row[summary.ENV_STEPS_PER_S]:.0f}",
            eval=latest_eval or "-",
            refresh=False,
          )
          bar.refresh()
        # Checked after a step, so a budget spent compiling still makes one.
        if max_minutes is not None and time.perf_counter() - start > 60 * max_minutes:
          stopped_by = "minutes"
          break
        if stop is not None and stop(row):
          stopped_by = "stop"
          break
      stopped_by = signals.requested or stopped_by
      if stopped_by == "minutes" and tc.eval_every and history and last_eval != current_step():
        # The wall-clock budget ends between evaluations: score what it
        # reached (a signal, by contrast, asks to stop soon: no evaluation).
        run_eval(current_step(), history[-1]["env_steps"], history[-1]["wall_s"])
      save()
  except KeyboardInterrupt:
    # A second Ctrl-C: `state` is still the last complete step.
    stopped_by = "SIGINT"
    say("interrupted: saving the last complete step")
    save()
  finally:
    writer.close()
    if bar is not None:
      bar.close()
  return RunResult(
    state=state,
    history=history,
    evals=evals,
    checkpoint_dir=checkpoint_dir,
    stopped_by=stopped_by,
    saved_step=saved_step,
  )
