"""A profile of one Anakin step: each jitted piece timed alone, the whole step
end to end, for several configs in one process (`scripts/benchmark_train.py`).

Pieces, all jitted on their own and run on the state of a warmed-up learner
(replay filled past `min_replay`, so updates are applied):

* rollout: one self-play chunk (search, env and bookkeeping);
* search: one search call on B lanes (the agent's, `AgentSpec.search`); a chunk makes
  `searches / B` of them;
* replay add, replay prepare: once per chunk;
* sample, update: one batch draw; one gradient update (its own draw
  included), `updates_per_chunk` of them per step;
* step: the whole jitted Anakin step, chained over repeats (the state
  advances, as in training).

Timing: compile and one warm-up call, then the median of `repeats` blocking
calls. The configs take turns call by call, so a change of machine load hits
them all alike; compare them by the ratio measured in the same run.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import statistics
import time
from typing import Callable, Dict, List, Sequence, Tuple

import jax
import numpy as np

from anakin_mz.core import replay as replay_lib
from anakin_mz.runtime import scaling
from anakin_mz.runtime import seeds as seeds_lib
from anakin_mz.agents.replay_learner import Learner, TrainState
from anakin_mz.config import Config
from anakin_mz.core.selfplay import rollout

PIECES = ("rollout", "search", "replay_add", "replay_prepare", "sample", "update")


@dataclasses.dataclass
class Profile:
  """Medians (seconds per call) and per-step counts of one config.

  Attributes:
    name: label of the config.
    seconds: piece -> median seconds of one call (PIECES and "step").
    calls: piece -> calls per Anakin step (mean over the timed steps).
    transitions, searches, decisions, updates: per step (means).
    num_simulations: simulations per search.
  """

  name: str
  seconds: Dict[str, float]
  calls: Dict[str, float]
  transitions: float
  searches: float
  decisions: float
  updates: float
  num_simulations: int

  @property
  def step(self) -> float:
    return self.seconds["step"]

  def rates(self) -> Dict[str, float]:
    """End-to-end figures of the Anakin step, per second."""
    return {
      "env transitions/s": self.transitions / self.step,
      "searches/s": self.searches / self.step,
      "simulations/s": self.searches * self.num_simulations / self.step,
      "updates/s": self.updates / self.step,
      "decisions/search": self.decisions / max(self.searches, 1.0),
    }


def _block(x):
  return jax.block_until_ready(x)


class _Subject:
  """One config: its learner, warmed state and jitted pieces."""

  def __init__(self, name: str, config: Config, seed: int):
    self.name = name
    self.learner = learner = Learner(config)
    tc = config.train
    state = learner.init(jax.random.PRNGKey(seed))
    # Fill the buffer until updates apply (updates cost what they cost only
    # once `ready`; before that they are computed and dropped anyway).
    for _ in range(2 * tc.min_replay // tc.rollout_length + 2):
      state, metrics = learner.jit_step(state)
    if int(metrics.updates_applied) == 0:
      raise ValueError(f"{name}: no update applied after warm-up")
    self.state: TrainState = state
    self.chain = jax.tree.map(jax.numpy.copy, state)  # jit_step deletes what it steps
    env, net, search = learner.env, learner.network, learner.agent.search
    search_cfg = config.search
    temperature = learner.temperature(state.update_step)
    self.rollout = jax.jit(functools.partial(_rollout, learner=learner, temperature=temperature))
    self.search = jax.jit(
      lambda params, key, s: (
        search(
          params, s, key, model=net, env=env, config=search_cfg, temperature=temperature
        ).action_weights
      )
    )
    self.add = jax.jit(functools.partial(replay_lib.add, drop_invalid=True))
    self.prepare = jax.jit(
      functools.partial(
        replay_lib.prepare,
        K=tc.unroll_steps,
        num_players=env.num_players,
        payoff=env.payoff,
        td_steps=tc.td_steps,
        discount=config.discount,
        value_lambda=tc.value_lambda,
        bootstrap=tc.value_bootstrap,
      )
    )
    self.sample = jax.jit(
      functools.partial(
        replay_lib.sample_prepared,
        batch_size=tc.batch_size,
        K=tc.unroll_steps,
        num_players=env.num_players,
        num_actions=env.num_actions,
      )
    )
    self.update = _on_mesh(
      learner,
      lambda params, opt, key, prepared: learner._update((params, opt), key, prepared=prepared),
    )
    # Inputs of the pieces, from the warmed state.
    key = jax.random.PRNGKey(seed + 1)
    _, self.records, _ = self.rollout(state.params, state.actor, key)
    self.prepared = self.prepare(self.add(state.buffer, self.records))
    self.counts: List[Dict[str, float]] = []

  def calls(self) -> Dict[str, Callable[[], object]]:
    s, key = self.state, jax.random.PRNGKey(7)
    return {
      "rollout": lambda: self.rollout(s.params, s.actor, key),
      "search": lambda: self.search(s.params, key, s.actor.env_state),
      "replay_add": lambda: self.add(s.buffer, self.records),
      "replay_prepare": lambda: self.prepare(s.buffer),
      "sample": lambda: self.sample(self.prepared, key),
      "update": lambda: self.update(s.params, s.opt_state, key, self.prepared),
      "step": self._step,
    }

  def _step(self):
    self.chain, metrics = self.learner.jit_step(self.chain)
    metrics = jax.device_get(metrics)
    self.counts.append(
      {
        "transitions": float(metrics.transitions),
        "searches": float(metrics.search.searches),
        "decision_steps": float(metrics.decision_steps),
        "updates_applied": float(metrics.updates_applied),
      }
    )
    return metrics


def _on_mesh(learner: Learner, fn):
  """`fn`, a piece of the device-local step (it may use the mesh's
  collectives), jitted on the learner's mesh with every input and output
  replicated: the pieces are timed on a one-device mesh."""
  specs = jax.sharding.PartitionSpec()
  return jax.jit(
    jax.shard_map(fn, mesh=learner.mesh, in_specs=specs, out_specs=specs, check_vma=False)
  )


def _rollout(params, actor, key, *, learner: Learner, temperature):
  tc = learner.config.train
  return rollout(
    params,
    actor,
    key,
    env=learner.env,
    network=learner.network,
    config=learner.config.search,
    num_steps=tc.rollout_length,
    temperature=temperature,
    search=learner.agent.search,
    search_at_chance=tc.search_at_chance,
  )


def profile(
  configs: Sequence[tuple],
  repeats: int = 5,
  seed: int = 0,
  log: Callable[[str], None] = lambda _: None,
) -> List[Profile]:
  """Times the pieces and the whole step of each `(name, Config)`.

  Returns one `Profile` per config, in order.
  """
  if repeats < 1:
    raise ValueError(f"repeats must be >= 1, got {repeats}")
  subjects = []
  for name, config in configs:
    log(f"compiling and warming up: {name}")
    subjects.append(_Subject(name, config, seed))
  pieces = list(PIECES) + ["step"]
  calls = [s.calls() for s in subjects]
  for c in calls:  # compile + warm-up
    for piece in pieces:
      _block(c[piece]())
  for s in subjects:
    s.counts.clear()
  times = [{p: [] for p in pieces} for _ in subjects]
  for r in range(repeats):
    log(f"repeat {r + 1}/{repeats}")
    for piece in pieces:
      for i, c in enumerate(calls):
        t0 = time.perf_counter()
        _block(c[piece]())
        times[i][piece].append(time.perf_counter() - t0)
  out = []
  for s, t in zip(subjects, times):
    mean = lambda k: float(np.mean([c[k] for c in s.counts]))
    tc = s.learner.config.train
    num_envs = tc.num_envs
    per_step = {
      "rollout": 1.0,
      "search": mean("searches") / num_envs,
      "replay_add": 1.0,
      "replay_prepare": 1.0,
      "sample": float(s.learner.updates_per_chunk),
      "update": float(s.learner.updates_per_chunk),
      "step": 1.0,
    }
    out.append(
      Profile(
        name=s.name,
        seconds={p: statistics.median(v) for p, v in t.items()},
        calls=per_step,
        transitions=mean("transitions"),
        searches=mean("searches"),
        decisions=mean("decision_steps"),
        updates=mean("updates_applied"),
        num_simulations=s.learner.config.search.num_simulations,
      )
    )
  return out


def report(profiles: Sequence[Profile]) -> str:
  """The breakdown table and the end-to-end figures, with the ratio of each
  profile to the last one (the baseline)."""
  names = [p.name for p in profiles]
  width = max(12, *(len(n) for n in names)) + 2
  lines = [
    "Breakdown of one Anakin step: ms per call x calls per step = ms per step (% of the step).",
    "`update` includes its batch draw, so `sample` is part of it; `search` is part of `rollout`.",
  ]
  head = f"{'piece':<16}" + "".join(f"{n:>{2 * width + 10}}" for n in names)
  lines.append(head)
  for piece in list(PIECES) + ["step"]:
    row = f"{piece:<16}"
    for p in profiles:
      ms = 1e3 * p.seconds[piece]
      n = p.calls[piece]
      total = ms * n
      cell = f"{ms:8.2f} x {n:5.1f} = {total:8.1f} ({100 * total / (1e3 * p.step):3.0f}%)"
      row += f"{cell:>{2 * width + 10}}"
    lines.append(row)
  lines.append("")
  base = profiles[-1]
  head = f"{'end to end':<20}" + "".join(f"{n:>{width}}" for n in names)
  if len(profiles) > 1:
    head += "".join(f"{'ratio ' + p.name[:8]:>{width + 4}}" for p in profiles[:-1])
  lines.append(head)
  for key in profiles[0].rates():
    row = f"{key:<20}" + "".join(
      f"{p.rates()[key]:>{width}.1f}" if p.rates()[key] >= 10 else f"{p.rates()[key]:>{width}.3f}"
      for p in profiles
    )
    if len(profiles) > 1:
      for p in profiles[:-1]:
        ratio = p.rates()[key] / max(base.rates()[key], 1e-12)
        row += f"{ratio:>{width + 4}.2f}x"
    lines.append(row)
  return "\n".join(lines)


def time_step(config: Config, *, repeats: int = 8, warmup: int = 3) -> float:
  """Median wall seconds of one Anakin step as the run loop makes it
  (`Learner.jit_step`, on every device of the mesh), after `warmup` steps
  (compilation included)."""
  return time_steps(config, ways=("donated",), repeats=repeats, warmup=warmup)["donated"]


def time_steps(
  config: Config,
  *,
  ways: Sequence[str] = ("copied", "donated"),
  repeats: int = 8,
  warmup: int = 3,
) -> Dict[str, float]:
  """Median wall seconds of one Anakin step, jitted each of `ways`: "copied"
  (`Learner.copying_step`: each step writes a fresh state, the replay buffer
  copied) and "donated" (`Learner.jit_step`, the run loop's), taking turns
  call by call (`scripts/benchmark_donation.py`)."""
  learner = Learner(config)
  every = {"copied": learner.copying_step, "donated": learner.jit_step}
  unknown = sorted(set(ways) - set(every))
  if unknown:
    raise ValueError(f"unknown ways {unknown}; valid: {', '.join(every)}")
  fns = {name: every[name] for name in ways}
  states = {name: learner.init_sharded(config.seed) for name in fns}
  times: Dict[str, List[float]] = {name: [] for name in fns}
  for i in range(warmup + repeats):
    for name, fn in fns.items():
      t0 = time.perf_counter()
      states[name], _ = fn(states[name])
      jax.block_until_ready(states[name])
      if i >= warmup:
        times[name].append(time.perf_counter() - t0)
  return {name: float(np.median(t)) for name, t in times.items()}


# Instructions that launch no kernel of their own.
_FREE_OPS = frozenset(
  {
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "bitcast",
    "after-all",
    "partition-id",
    "replica-id",
    "opt-barrier",
  }
)
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%\S+\s*=\s*.*?\s([a-z][a-z0-9\-]*)\((.*)$")


def _computations(hlo: str) -> Tuple[Dict[str, List[str]], str]:
  """The instruction lines of each computation of a compiled HLO module's
  text, and the entry computation's name."""
  comps: Dict[str, List[str]] = {}
  entry, name = "", None
  for line in hlo.splitlines():
    head = re.match(r"^(ENTRY\s+)?%(\S+)\s.*\{\s*$", line)
    if head:
      name = head.group(2)
      comps[name] = []
      if head.group(1):
        entry = name
    elif line.startswith("}"):
      name = None
    elif name is not None:
      comps[name].append(line)
  return comps, entry


@dataclasses.dataclass(frozen=True)
class SequentialOps:
  """What `sequential_ops` counted.

  Attributes:
    total: kernels one call runs in sequence (loop bodies times trips).
    unknown_loops: while loops whose trip count XLA does not know (their
      count is an estimate: see `sequential_ops`).
  """

  total: int
  unknown_loops: int


def sequential_ops(hlo: str, outer_trips: int = 1) -> SequentialOps:
  """The number of kernels a compiled program (`jax.jit(f).lower(...)
  .compile().as_text()`) runs one after another: every instruction that
  launches work counts 1 (a fusion is one kernel, whatever it fuses), a
  `call` counts its computation, a `conditional` its largest branch, and a
  `while` (body + condition) times its trip count. On an accelerator each
  kernel costs a launch latency whatever its size, so this is the step's
  latency floor there.

  XLA knows the trip count of `fori_loop`s and `scan`s (the search's
  simulations, the updates); a `while_loop` with a data-dependent stop has
  none. The largest such loop, the self-play rollout's, counts
  `outer_trips` iterations (the caller measures them); the others (a
  game's rare long chance runs) count one.
  """
  comps, entry = _computations(hlo)
  cache: Dict[str, int] = {}
  unknown: List[Tuple[int, str]] = []

  def size(name: str) -> int:
    if name in cache:
      return cache[name]
    total = 0
    for line in comps.get(name, []):
      m = _INSTRUCTION.match(line)
      if not m:
        continue
      op, rest = m.group(1), m.group(2)
      if op in _FREE_OPS:
        continue
      if op == "while":
        body = re.search(r"body=%([^\s,]+)", rest).group(1)
        cond = re.search(r"condition=%([^\s,]+)", rest).group(1)
        inner = size(body) + size(cond)
        trips = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', rest)
        if trips:
          total += int(trips.group(1)) * inner
        else:
          unknown.append((inner, line))
          total += inner  # one trip; the rollout's gets the rest below
      elif op == "call":
        total += size(re.search(r"to_apply=%([^\s,]+)", rest).group(1))
      elif op == "conditional":
        branches = re.search(r"branch_computations=\{([^}]*)\}", rest)
        if branches:
          names = [b.strip().lstrip("%") for b in branches.group(1).split(",")]
        else:
          names = re.findall(r"(?:true|false)_computation=%([^\s,]+)", rest)
        total += 1 + max(size(b) for b in names)
      else:
        total += 1
    cache[name] = total
    return total

  total = size(entry)
  if unknown:
    total += (outer_trips - 1) * max(inner for inner, _ in unknown)
  return SequentialOps(total=total, unknown_loops=len(unknown))


@dataclasses.dataclass(frozen=True)
class ScaleRow:
  """One setting of `scale_rows` (JSON-ready with `dataclasses.asdict`).

  Attributes:
    lanes: self-play lanes (global, per seed); devices: the mesh's devices.
    batch_size: the scaled batch (`scaling.scale`).
    env_steps_per_s, updates_per_s: medians over the timed steps, summed
      over the seeds.
    step_s: median seconds of one Anakin step.
    iterations: rollout iterations per step (searches / lanes, measured).
    sequential_ops: kernels one step runs in sequence (`sequential_ops`).
    unknown_loops: loops in it without a known trip count.
    seeds: the seeds trained in the one program (`runtime.seeds`; 1: a
      single run's step).
    layout: a study's layout on the devices, "seeds" or "lanes"
      (`seeds.choose_layout`); "" for one seed.
  """

  lanes: int
  devices: int
  batch_size: int
  env_steps_per_s: float
  updates_per_s: float
  step_s: float
  iterations: float
  sequential_ops: int
  unknown_loops: int
  seeds: int = 1
  layout: str = ""


def scale_rows(
  config: Config,
  lanes: Sequence[int],
  *,
  seeds: Sequence[int] = (1,),
  layouts: Sequence[str] = ("auto",),
  repeats: int = 3,
  warmup: int = 2,
  log: Callable[[str], None] = lambda _: None,
) -> List[ScaleRow]:
  """Times one Anakin step of `config` resized to each number of `lanes`
  (`scaling.scale`) on every device, for each number of `seeds` in one
  program (1: the learner's own step; S > 1: the study of seeds 0..S-1,
  `seeds.make_study`, in each of `layouts` (`train.seed_layout` values;
  those that come to the same layout on these devices are timed once)):
  compiled once each, warmed up, then timed round-robin (one step of each
  setting in turn, `repeats` rounds, so a change of machine load hits all
  settings alike); medians, the throughputs summed over the seeds.

  Raises:
    ValueError: a layout `seeds.choose_layout` refuses for these devices.
  """
  settings = []
  for n in lanes:
    for num_seeds in seeds:
      if num_seeds == 1:
        settings.append((n, 1, ""))
        continue
      on = (jax.device_count(), jax.process_count())
      chosen = [seeds_lib.choose_layout(x, num_seeds, *on) for x in layouts]
      for name in dict.fromkeys(layout.name for layout in chosen):
        settings.append((n, num_seeds, name))
  subjects = []
  for n, num_seeds, layout in settings:
    cfg = scaling.scale(config, n)
    if num_seeds == 1:
      learner = Learner(cfg)
      stepper, state = learner, learner.init_sharded(cfg.seed)
    else:
      train = dataclasses.replace(cfg.train, seeds=tuple(range(num_seeds)), seed_layout=layout)
      stepper = seeds_lib.make_study(dataclasses.replace(cfg, train=train))
      learner, state = stepper.learner, stepper.init_sharded(stepper.seeds)
    name = f"{n} lanes x {num_seeds} seed(s){f' ({layout})' if layout else ''}"
    t0 = time.perf_counter()
    step = stepper.jit_step.lower(state).compile()
    log(f"{name}: compiled in {time.perf_counter() - t0:.0f} s")
    searches = []
    for _ in range(warmup):
      state, metrics = step(state)
      searches.append(float(np.sum(metrics.search.searches)))
    jax.block_until_ready(state)
    setting = (n, num_seeds, layout, int(stepper.mesh.size), name)
    subjects.append([setting, cfg, learner, step, state, searches, []])
  for r in range(repeats):
    for subject in subjects:
      (*_, name), _, learner, step, state, searches, times = subject
      t0 = time.perf_counter()
      state, metrics = step(state)
      jax.block_until_ready(state)
      times.append(time.perf_counter() - t0)
      searches.append(float(np.sum(metrics.search.searches)))
      subject[4] = state
      log(f"round {r + 1}: {name} {times[-1]:.2f} s")
  rows = []
  for (n, num_seeds, layout, devices, _), cfg, learner, step, _, searches, times in subjects:
    dt = statistics.median(times)
    iterations = statistics.median(searches) / (n * num_seeds)
    ops = sequential_ops(step.as_text(), outer_trips=round(iterations))
    rows.append(
      ScaleRow(
        lanes=n,
        devices=devices,
        batch_size=cfg.train.batch_size,
        env_steps_per_s=num_seeds * learner.transitions_per_chunk / dt,
        updates_per_s=num_seeds * learner.updates_per_chunk / dt,
        step_s=dt,
        iterations=iterations,
        sequential_ops=ops.total,
        unknown_loops=ops.unknown_loops,
        seeds=num_seeds,
        layout=layout,
      )
    )
  return rows
