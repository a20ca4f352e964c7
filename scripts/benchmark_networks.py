"""Time of one learner update per network kind, on a game's observation.

One update is what `anakin.Learner` does per gradient step: `Network.unroll`
over K steps, the loss of eq. (1) (`loss.ndmz_loss`), its gradient and a
clipped Adam step, here on a synthetic batch (the game's real observation
shape and action counts, random boards and targets: the cost does not depend
on the values). Every kind is compiled first, then timed in round-robin
passes in the same process (a change of machine load hits all alike); the
figure is the median pass, with its ratio to the first kind (mlp).
`resnet-scan` is the resnet with its unroll as a `lax.scan` (what it was
before): on XLA's CPU backend the gradient convolutions inside the loop miss
the fast convolution, which is why the resnet's unroll is now a Python loop.

    taskset -c 1 python scripts/benchmark_networks.py --env breakthrough
    taskset -c 1 python scripts/benchmark_networks.py --env breakthrough \\
        --param rows=8 --param columns=8 --kinds mlp conv resnet

Figures (2026-11-23, one pinned core of the shared 2-core CPU under heavy
load (load average ~15), NetworkConfig defaults, batch 256, K = 5, medians of
3 passes; ms per update, ratio to mlp in the same run):

| game (observation) | mlp | conv | resnet | resnet-scan |
| --- | --- | --- | --- | --- |
| breakthrough 5x5 (5, 5, 3) | 356 (1.00) | 260 (0.73) | 2633 (7.4) | 27420 (77) |
| breakthrough 8x8 (8, 8, 3) | 551 (1.00) | 344 (0.62) | 15074 (27) | - |
| minatar-breakout (10, 10, 4) | 1140 (1.00) | 616 (0.54) | 15189 (13) | - |

(5x5: `--kinds mlp conv resnet resnet-scan`; 8x8: `--param rows=8 --param
columns=8`; MinAtar: `--env minatar-breakout`, on the gymnax adapter of the
wave2-21 branch.) conv measured faster than mlp in every run, though it has
more parameters and FLOPs; the cause was not pinned down.

Why the resnet is slow on a CPU: (1) inside a `lax.scan` the gradient
convolutions keep a layout (`f01b_i01o->01bf`) that XLA's CPU backend does
not hand to its fast convolution: 10x (fixed: the resnet's unroll is now a
Python loop); (2) it is simply much more arithmetic: 17 (5x5) and 61 (8x8)
GFLOP per update against ~1 for the MLP, because every one of the K dynamics
steps convolves the whole board `2 * dynamics_blocks + 1` times, the first
time over `channels + A + C` input planes (the action one-hot as planes:
193 of them on 8x8 Breakthrough). On a CPU use `conv` (the convolutions run
once, in h) or `mlp`.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import optax

import envs
from anakin_mz.core.loss import ndmz_loss
from anakin_mz.core.networks import KINDS, Network, NetworkConfig
from anakin_mz.core.replay import Batch

SPECS = KINDS + ("resnet-scan",)


def synthetic_batch(env: envs.Env, n: int, k: int, key) -> Batch:
  """A `Batch` of n samples with random 0/1 planes, actions and targets."""
  ks = jax.random.split(key, 3)
  a, c = env.num_actions, env.num_chance_outcomes
  return Batch(
    observation=jax.random.bernoulli(ks[0], 0.3, (n,) + env.observation_shape).astype(jnp.float32),
    actions=jax.random.randint(ks[1], (n, k), 0, a + c),
    target_value=jax.random.uniform(ks[2], (n, k + 1), minval=-1.0, maxval=1.0),
    target_reward=jnp.zeros((n, k)),
    target_policy=jnp.full((n, k + 1, a), 1.0 / a),
    policy_mask=jnp.ones((n, k + 1), bool),
    target_chance=jnp.full((n, k + 1, c), 1.0 / c),
    chance_mask=jnp.zeros((n, k + 1), bool),
    target_identity=jnp.zeros((n, k), jnp.int32),
  )


def build(env: envs.Env, spec: str, overrides: dict, batch: Batch):
  """(compiled update, its arguments, compile seconds, GFLOP, params)."""
  kind = "resnet" if spec == "resnet-scan" else spec
  net = Network(env, NetworkConfig(kind=kind, **overrides))
  if spec == "resnet-scan":
    net.unroll_loop = False
  params = net.init(jax.random.PRNGKey(0))
  opt = optax.chain(optax.clip_by_global_norm(5.0), optax.adam(1e-3))

  def update(params, opt_state, batch):
    grads, _ = jax.grad(lambda p: ndmz_loss(p, net, batch), has_aux=True)(params)
    updates, opt_state = opt.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state

  args = (params, opt.init(params), batch)
  start = time.perf_counter()
  compiled = jax.jit(update).lower(*args).compile()
  seconds = time.perf_counter() - start
  cost = compiled.cost_analysis()
  cost = cost[0] if isinstance(cost, list) else cost
  gflop = float((cost or {}).get("flops", math.nan)) / 1e9
  size = sum(x.size for x in jax.tree.leaves(params))
  return compiled, args, seconds, gflop, size


def _parse_value(text: str):
  if "x" in text and all(p.isdigit() for p in text.split("x")):
    return tuple(int(p) for p in text.split("x"))
  for parse in (int, float):
    try:
      return parse(text)
    except ValueError:
      pass
  return text


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--env", default="breakthrough", help="registered game")
  parser.add_argument("--param", action="append", default=[], help="game KEY=VALUE")
  parser.add_argument(
    "--network",
    action="append",
    default=[],
    help="NetworkConfig KEY=VALUE for every kind (tuples as 16x16)",
  )
  parser.add_argument("--kinds", nargs="+", default=["mlp", "conv", "resnet"])
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--unroll-steps", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
  args = parser.parse_args(argv)
  bad = [k for k in args.kinds if k not in SPECS]
  if bad:
    print(f"error: unknown kind(s) {bad}; valid: {list(SPECS)}", file=sys.stderr)
    return 2
  if min(args.batch, args.unroll_steps, args.repeats) < 1:
    print("error: --batch, --unroll-steps and --repeats must be >= 1", file=sys.stderr)
    return 2
  try:
    pairs = [p.split("=", 1) for p in args.param + args.network]
    if any(len(p) != 2 for p in pairs):
      raise ValueError("--param and --network take KEY=VALUE")
    params = {k: _parse_value(v) for k, v in pairs[: len(args.param)]}
    overrides = {k: _parse_value(v) for k, v in pairs[len(args.param) :]}
    env = envs.make(args.env, **params)
    NetworkConfig(**overrides)
    for kind in args.kinds:  # planes-only kinds refuse flat observations here
      Network(env, NetworkConfig(kind="resnet" if kind == "resnet-scan" else kind, **overrides))
  except (ValueError, TypeError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2

  batch = synthetic_batch(env, args.batch, args.unroll_steps, jax.random.PRNGKey(1))
  built = {k: build(env, k, overrides, batch) for k in args.kinds}
  times = {k: [] for k in args.kinds}
  for _ in range(args.repeats + 1):  # the first pass warms up
    for kind, (fn, fargs, *_) in built.items():
      start = time.perf_counter()
      jax.block_until_ready(fn(*fargs))
      times[kind].append(time.perf_counter() - start)
  base = statistics.median(times[args.kinds[0]][1:])
  rows = {}
  for kind, (_, _, compile_s, gflop, size) in built.items():
    ms = statistics.median(times[kind][1:]) * 1e3
    rows[kind] = dict(
      ms=ms, ratio=ms / (base * 1e3), compile_s=compile_s, gflop=gflop, params=int(size)
    )
  if args.json:
    print(json.dumps(dict(env=env.id, shape=list(env.observation_shape), kinds=rows)))
    return 0
  print(
    f"{env.id} observation {env.observation_shape}, batch {args.batch}, K {args.unroll_steps}, "
    f"medians of {args.repeats}"
  )
  print(f"{'kind':12s} {'ms/update':>10s} {'ratio':>7s} {'compile s':>9s} {'GFLOP':>7s} params")
  for kind, r in rows.items():
    print(
      f"{kind:12s} {r['ms']:10.1f} {r['ratio']:7.2f} {r['compile_s']:9.1f} "
      f"{r['gflop']:7.2f} {r['params']}"
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
