"""Train the PPO baseline (anakin_mz.agents.ppo) on a single-player game.

    anakin-mz ppo --env catch total_env_steps=20000 num_envs=16 num_steps=16 \\
        num_minibatches=4 hidden=64,64 learning_rate=3e-3 --logdir runs/ppo_catch
    anakin-mz ppo --env minatar-breakout --logdir runs/ppo_breakout --minutes 60

`KEY=VALUE` overrides set `PPOConfig` fields (tuples as `64,64`), PPO's
settings flat with the budget in env steps. It trains with the run loop of
every agent on one device (`anakin-mz train --agent=ppo` does the same from a
config, with its resume and evaluation): one line per step of `--log-every`
iterations (env steps, wall-clock, mean return of the episodes that ended);
`--logdir` gets the TensorBoard scalars under the run loop's tags, so
`anakin-mz plot` draws PPO beside NDMZ runs, and the final checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from typing import Optional, Sequence

import jax

import envs
from anakin_mz.cli import options
from anakin_mz.eval.report import parse_params
from anakin_mz.agents.ppo import PPOConfig, train


def _value(text: str, default):
  if isinstance(default, bool):
    if text.lower() in ("true", "false"):
      return text.lower() == "true"
    raise ValueError(f"expected true or false, got {text!r}")
  if isinstance(default, tuple):
    return tuple(int(p) for p in text.strip("[]()").split(","))  # 64,64 or [64, 64]
  if isinstance(default, int):
    return int(float(text)) if float(text).is_integer() else int(text)
  if isinstance(default, float):
    return float(text)
  return text


def _config(overrides: Sequence[str]) -> PPOConfig:
  fields = {f.name: f.default for f in dataclasses.fields(PPOConfig)}
  kwargs = {}
  for item in overrides:
    key, sep, text = item.partition("=")
    if not sep:
      raise ValueError(f"override {item!r} is not KEY=VALUE")
    if key not in fields:
      raise ValueError(f"unknown PPO key {key!r}; valid: {', '.join(sorted(fields))}")
    try:
      kwargs[key] = _value(text, fields[key])
    except ValueError:
      raise ValueError(f"{key} must be like its default {fields[key]!r}, got {text!r}") from None
  return PPOConfig(**kwargs)


def main(argv: Optional[Sequence[str]] = None, prog: Optional[str] = None) -> int:
  parser = options.parser(__doc__, prog)
  parser.add_argument("--env", required=True, help="a registered single-player game")
  parser.add_argument("--param", action="append", default=[], help="game KEY=VALUE")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--logdir", default=None, help="TensorBoard directory")
  parser.add_argument("--log-every", type=int, default=10, help="iterations per log line")
  parser.add_argument("--minutes", type=float, default=None, help="wall-clock budget")
  parser.add_argument("--json", action="store_true", help="print the history as JSON")
  parser.add_argument("overrides", nargs="*", help="PPOConfig KEY=VALUE")
  args = parser.parse_args(argv)
  try:
    config = _config(args.overrides)
    env = envs.make(args.env, **parse_params(args.param))
    if env.num_players != 1:
      raise ValueError(f"PPO needs a single-player game; {args.env!r} has {env.num_players}")
    if args.log_every < 1:
      raise ValueError(f"--log-every must be >= 1, got {args.log_every}")
    if args.minutes is not None and not args.minutes > 0:
      raise ValueError(f"--minutes must be > 0, got {args.minutes}")
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2

  def show(row):
    if not args.json:
      ret = "   n/a" if math.isnan(row["return"]) else f"{row['return']:+.3f}"
      print(
        f"env steps {row['env_steps']:>10d}  wall {row['wall_s']:7.1f} s  return {ret}  "
        f"episodes {row['episodes']:>6d}  {row['env_steps_per_s']:,.0f} steps/s",
        flush=True,
      )

  seconds = None if args.minutes is None else 60 * args.minutes
  try:
    _, history = train(
      env,
      config,
      jax.random.PRNGKey(args.seed),
      log_every=args.log_every,
      logdir=args.logdir,
      max_seconds=seconds,
      on_log=show,
    )
  except ValueError as e:  # a logdir that holds a run's checkpoints, or is not writable
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.json:
    # NaN (no episode ended in a chunk) as null: strict JSON.
    clean = [{k: None if v != v else v for k, v in row.items()} for row in history]
    print(json.dumps(dict(env=env.id, config=dataclasses.asdict(config), history=clean)))
  return 0
