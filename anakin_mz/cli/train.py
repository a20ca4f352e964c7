"""Train NDMZ on a registered game.

    anakin-mz train --env=nannon                 # or: python scripts/train.py --env=nannon
    anakin-mz train --env=catch train.total_updates=2000 search.num_simulations=16
    anakin-mz train --env=nannon --minutes 60 --logdir runs/nannon
    anakin-mz train --env=nannon --logdir runs/nannon --resume
    anakin-mz train --env=nannon --agent=alphazero   # tdlambda, stochastic_muzero
    anakin-mz train --env=catch --agent=ppo ppo.num_minibatches=4
    anakin-mz train --env=minatar-breakout --config=ppo/minatar-breakout --devices 1
    anakin-mz train --env=nannon --config=nannon_12_5_6
    anakin-mz train --env=pgx-othello --updates 1e4
    anakin-mz train --env=nannon --seeds 0 1 2 3 --logdir runs/study   # one program

`--agent` trains another registered agent the same way (`anakin_mz/agents/`:
alphazero, tdlambda, stochastic_muzero, ppo, ...). The config is the game's
shipped one (`anakin_mz/configs/<env>.yaml`; a game without one, such as the
adapted `pgx-*` and `minatar-*` games, gets the generic config of its kind)
unless --config names a YAML file or another shipped config
(`ppo/minatar-breakout`: PPO with PureJaxRL's MinAtar settings);
`section.key=value` arguments override it, before or after the options.
Numbers, here and in --updates and --minutes, may be written 3e-4, 1e9,
1_000 or .5; booleans true/false. TensorBoard: `tensorboard --logdir runs`.
Each evaluation prints one short line (the score against random, the game's
own exact scores where it has them) and the run ends with a short table of
them; every metric goes to TensorBoard, and `--json FILE` writes every
evaluation with all of its metrics.

On CPU the run uses one JAX device per usable core (`--devices auto`, the
fastest measured; see anakin_mz/runtime/host.py; as many as divide the run's
sizes), `--devices N` forces N host devices. Each device plays, searches
and learns on its own lanes (anakin_mz/runtime/mesh.py); `train.num_envs` and
`train.batch_size` are global and must divide by their number. `--resume`
works on any device count. The sizes are per device by default (`--preset
per-device`: each device gets the config's lanes and batch, the learning
rate scaled with the batch's square root; one device runs the config as
written; docs/devices.md has the figures); `--preset cpu` keeps the config's sizes global, split
over the devices, so the same seed gives the same run on any device count;
`--preset accelerator` sizes the run for a GPU or TPU (1024 lanes per
device: anakin_mz/runtime/scaling.py). `--resume` keeps the sizes the
checkpoint was made with. A multi-host run (TPU slice, SLURM, Open MPI, or
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID) joins
`jax.distributed` first (anakin_mz/runtime/host.py).

Ctrl-C (SIGINT) or SIGTERM finishes the current step, saves a checkpoint in
<logdir>/checkpoints and exits 0; run again with --resume to continue exactly.
`--resume` where <logdir>/checkpoints holds no checkpoint (a mistyped
--logdir) is an error, as is an empty --logdir; `--resume-if-present`
continues where there is one and starts a new run where there is none.
A non-finite loss, gradient norm or parameter stops the run with exit code 3,
keeping the last good checkpoint and writing nothing non-finite.

`--seeds S ...` (or `train.seeds: [S, ...]` in the config) trains a study:
one run per seed, all in one compiled program (the state and step with a
leading seed axis: anakin_mz/runtime/seeds.py), each seed's run what
`--seed S` alone makes, to float rounding. Each seed's TensorBoard scalars,
checkpoints and `train.json` (what --json writes of a run) are under
<logdir>/seed<S>, a run directory as any other: `evaluate` and `export`
take it, and `--resume` continues the whole study. On several devices
`train.seed_layout` lays the study out: `seeds` puts whole seeds on each
device (the seeds must divide over the devices), `lanes` splits each seed's
lanes over them as one run does, and `auto` (the default) takes `seeds`
where the seeds divide, else `lanes`, by a rule, not a measurement; one line
says which (anakin_mz/runtime/seeds.py). The numbers are the same in either.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import envs
from anakin_mz import agents  # noqa: F401 (registers every agent)
from anakin_mz import config as config_lib
from anakin_mz.cli import options
from anakin_mz.runtime import console, host, scaling
from anakin_mz.core import registry


def main(argv=None, prog=None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument(
    "--env", required=True, type=options.env_name, help=f"one of {', '.join(envs.registered())}"
  )
  parser.add_argument("--config", default=None, help=options.CONFIG_HELP)
  parser.add_argument("overrides", nargs="*", help="section.key=value overrides")
  parser.add_argument("--seed", type=int, default=None, help="overrides the config seed")
  parser.add_argument(
    "--seeds",
    type=int,
    nargs="+",
    default=None,
    help="train these seeds as one program, each under <logdir>/seed<S> (train.seeds)",
  )
  parser.add_argument(
    "--agent",
    default=None,
    help=f"one of {', '.join(registry.names())} (default ndmz): shorthand for the "
    "override agent=NAME",
  )
  parser.add_argument(
    "--updates",
    type=options.integer,
    default=None,
    help="stop after this many updates (default train.total_updates), rounded up to whole "
    "steps (the run says so)",
  )
  parser.add_argument("--minutes", type=options.real, default=None, help="wall-clock budget")
  parser.add_argument("--logdir", default=None, help="default runs/<env>")
  parser.add_argument(
    "--resume",
    action="store_true",
    help="continue from the latest checkpoint in <logdir>/checkpoints (an error if it holds none)",
  )
  parser.add_argument(
    "--resume-if-present",
    action="store_true",
    help="--resume where <logdir>/checkpoints holds a checkpoint, else start a new run there "
    "(a command that reruns itself after a preemption)",
  )
  parser.add_argument("--no-progress", action="store_true", help="no progress bar")
  parser.add_argument(
    "--json",
    default=None,
    help="also write the run's evaluations here, every metric of each (the console shows a "
    "few; TensorBoard has them all)",
  )
  parser.add_argument(
    "--devices",
    default="auto",
    help="CPU devices: 'auto' (one per usable core, the fastest measured) or N",
  )
  parser.add_argument(
    "--preset",
    default=None,
    help=f"sizes for the hardware: {', '.join(scaling.PRESETS)} (default per-device: "
    "each device the config's lanes and batch; --resume: the checkpoint's sizes)",
  )
  args = parser.parse_intermixed_args(argv)
  if args.logdir is not None and not args.logdir.strip():
    # Not runs/<env> in silence: a --resume would continue another run.
    parser.error("--logdir is empty: give a directory, or leave --logdir out for runs/<env>")
  try:  # before anything starts JAX
    devices = host.configure(args.devices)
  except ValueError as e:
    parser.error(str(e))
  import jax

  if args.seed is not None and args.seeds is not None:
    parser.error("--seed and --seeds: give one (--seeds trains a study of several seeds)")
  overrides = list(args.overrides)
  if args.seed is not None:
    overrides.append(f"seed={args.seed}")
  if args.seeds is not None:
    overrides.append(f"train.seeds=[{','.join(map(str, args.seeds))}]")
  if args.agent is not None:
    overrides.append(f"agent={args.agent}")
  try:
    cfg, _, _ = config_lib.load_for_env(args.env, args.config, overrides)
  except ValueError as e:
    parser.error(str(e))
  from anakin_mz.runtime import seeds

  logdir = _logdir(args)
  checkpoint_dirs = [os.path.join(d, "checkpoints") for d in seeds.run_dirs(logdir, cfg)]
  if args.resume and not args.resume_if_present:
    from anakin_mz.runtime import checkpoint as ckpt

    if not any(ckpt.steps(d) for d in checkpoint_dirs):
      parser.error(
        f"--resume: no checkpoint in {checkpoint_dirs[0]!r}"
        f"{' or its other seeds' if len(checkpoint_dirs) > 1 else ''} to continue (is --logdir "
        "right?); --resume-if-present starts a new run where there is none"
      )
  args.resume = args.resume or args.resume_if_present
  try:
    saved_lanes = None
    if args.resume and args.preset is None:
      saved_lanes = _saved_lanes(checkpoint_dirs)
    if saved_lanes is not None:
      cfg = scaling.resumed(cfg, saved_lanes)
      sizing = "the checkpoint's"
    else:
      name = args.preset or "per-device"
      cfg = scaling.preset(cfg, name, jax.device_count())
      sizing = f"--preset {name}"
  except ValueError as e:
    parser.error(str(e))
  if args.updates is not None and args.updates < 1:
    parser.error("--updates must be >= 1")
  if args.minutes is not None and args.minutes <= 0:
    parser.error("--minutes must be > 0")
  if args.json:
    parent = os.path.dirname(os.path.abspath(args.json))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
      parser.error(f"cannot write --json {args.json!r}: {parent!r} is not a writable directory")

  from anakin_mz.eval import periodic
  from anakin_mz.runtime import run  # after validation: errors come fast

  mesh = run.auto_mesh(cfg) if args.devices == "auto" else None
  if cfg.train.seeds:  # the layout train_seeds takes on these devices
    num_devices = jax.device_count() if mesh is None else int(mesh.size)
    try:
      layout = seeds.choose_layout(
        cfg.train.seed_layout, len(cfg.train.seeds), num_devices, jax.process_count()
      )
    except ValueError as e:
      parser.error(str(e))
  if mesh is not None and mesh.size < jax.device_count():
    fits = f"its sizes divide by {mesh.size}"
    if cfg.train.seeds and cfg.train.seed_layout == "seeds":
      fits = f"its seeds divide over {mesh.size}"
    devices += f"; the run trains on {mesh.size} of them ({fits})"
  print(f"devices: {devices}", flush=True)
  tc = cfg.train
  print(
    f"sizes ({sizing}): {tc.num_envs} lanes, batch {tc.batch_size}, "
    f"learning rate {tc.learning_rate:g}",
    flush=True,
  )

  if tc.seeds:
    print(f"study: seeds {', '.join(map(str, tc.seeds))} in one program", flush=True)
    print(layout.line(), flush=True)
  budget = dict(
    logdir=logdir,
    resume=args.resume,
    max_updates=args.updates,
    max_minutes=args.minutes,
    progress=not args.no_progress,
    mesh=mesh,
    evaluate=periodic.evaluate,
  )
  try:
    results = run.train_seeds(cfg, **budget) if tc.seeds else [run.train(cfg, **budget)]
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  except run.NonFiniteError as e:
    print(f"error: {e}", file=sys.stderr)
    return 3
  run_logdirs = seeds.run_dirs(logdir, cfg)
  summaries = [run_summary(r, d) for r, d in zip(results, run_logdirs)]
  if tc.seeds:
    for seed, d, summary in zip(tc.seeds, run_logdirs, summaries):
      with open(os.path.join(d, "train.json"), "w", encoding="utf-8") as f:
        json.dump(dict(summary, seed=seed), f, indent=1, default=float)
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      out = {str(s): x for s, x in zip(tc.seeds, summaries)} if tc.seeds else summaries[0]
      json.dump(out, f, indent=1, default=float)
  env = cfg.make_env()
  for result, d, seed in zip(results, run_logdirs, tc.seeds or (None,)):
    if seed is not None:
      print(f"seed {seed} ({d}):")
    if result.evals:
      where = f"TensorBoard ({d})"
      where += f" and {args.json}" if args.json else "; --json FILE writes them too"
      print(console.final_table(result.evals[-1], env, where))
    print(f"checkpoints: {result.checkpoint_dir} (last saved update {result.saved_step})")
  result = results[0]
  if result.stopped_by in ("SIGINT", "SIGTERM"):
    print(
      f"stopped by {result.stopped_by}; to continue, run the same command "
      f"with --resume (logdir {logdir})"
    )
  return 0


def run_summary(result, logdir: str) -> dict:
  """What `--json` writes of a finished `run.train` `result`: where the run
  is, where it stopped, and every evaluation with all its metrics (the
  untrained agent's first, where the run made it; the final one last)."""
  last = result.history[-1] if result.history else {}
  return {
    "logdir": logdir,
    "checkpoint_dir": result.checkpoint_dir,
    "saved_step": result.saved_step,
    "stopped_by": result.stopped_by,
    "update_step": last.get("update_step", result.saved_step),
    "env_steps": last.get("env_steps"),
    "wall_s": last.get("wall_s"),
    "evaluations": result.evals,
  }


def _logdir(args) -> str:
  return args.logdir or os.path.join("runs", args.env)


def _saved_lanes(directories) -> Optional[int]:
  """The global lanes of the newest checkpoint `--resume` continues in the
  first of `directories` (the run's, or the study's seeds') that holds one;
  None when none does (a fresh start)."""
  from anakin_mz.runtime import checkpoint as ckpt

  for directory in directories:
    for step in reversed(ckpt.steps(directory)):  # a corrupt newest step gives way, as in run.train
      try:
        return int(ckpt.load_metadata(directory, step)["config"]["train"]["num_envs"])
      except (ckpt.CheckpointError, KeyError, TypeError, ValueError):
        continue
  return None
