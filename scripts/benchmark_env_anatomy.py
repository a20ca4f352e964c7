"""Why is a game core slow? The anatomy of one env step, part by part.

For each game: the jaxpr size of one unbatched step (equations, sub-jaxprs
included, and the control-flow primitives in it: `cond`, `while`, `scan`,
which vmap turns into "run every branch" or "loop until every lane is
done"), the XLA cost analysis of `jit(vmap(step))` (flops, bytes), and the
wall time at one batch size of each part: the explicit and the keyed step,
`init`/`reset`, and the game core's own rules (`apply_action`,
`apply_chance`, `legal_action_mask`, `chance_probs`, `observe`). With
`--fusions N`, also the N costliest XLA ops (fusions, loops, copies) of the
random-play loop of `benchmark_envs.py` (keyed step, reset-select), from a
`jax.profiler` trace: what a part costs once XLA has fused it with its
neighbours, e.g. a small per-game value recomputed for every element of the
observation it feeds.

    taskset -c 1 python scripts/benchmark_env_anatomy.py
    taskset -c 1 python scripts/benchmark_env_anatomy.py --env carchess --batch 1024 --fusions 15

Times are medians of `--repeats` calls of the jitted function on one batch
of mixed states reached by random play; they are for comparing parts with
one another in one run, not across runs. This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp

import envs
from envs.policy import random_legal_action
from envs.testing import random_action

# Extra rows at non-default parameters: label -> (registered name, params).
VARIANTS: Dict[str, Tuple[str, Dict[str, object]]] = {
  "breakthrough_8x8": ("breakthrough", {"rows": 8, "columns": 8}),
}
CONTROL_FLOW = (
  "cond",
  "while",
  "scan",
  "select_n",
  "gather",
  "scatter",
  "scatter-add",
  "dot_general",
  "sort",
  "argmax",
  "cumsum",
)


def count_eqns(jaxpr) -> collections.Counter:
  """Primitive counts of a (closed) jaxpr, sub-jaxprs included."""
  counts = collections.Counter()

  def visit(j):
    for eqn in j.eqns:
      counts[eqn.primitive.name] += 1
      for p in eqn.params.values():
        subs = p if isinstance(p, (list, tuple)) else [p]
        for s in subs:
          if hasattr(s, "jaxpr") and hasattr(s.jaxpr, "eqns"):
            visit(s.jaxpr)
          elif hasattr(s, "eqns"):
            visit(s)

  visit(jaxpr.jaxpr)
  return counts


def mixed_states(env: envs.Env, batch: int, moves: int, key: jax.Array) -> envs.State:
  """A batch of states after `moves` explicit random transitions (restarting
  finished games), so decision, chance and a few terminal nodes mix."""

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, batch))

    def body(s, k):
      ka, kr = jax.random.split(k)
      s = jax.vmap(env.step)(s, random_action(s, ka))
      fresh = jax.vmap(env.init)(jax.random.split(kr, batch))
      return jax.tree.map(
        lambda f, x: jnp.where(s.done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, s
      ), None

    return jax.lax.scan(body, s, jax.random.split(k1, moves))[0]

  return run(key)


def timed(fn: Callable, args: Sequence, repeats: int, inner: int = 10) -> float:
  """Median seconds of one call of `fn(*args)` (batched), run `inner` times in
  a jitted `fori_loop` so that buffers are reused as in a real rollout (a
  fresh output buffer per call costs page faults, not compute). Each
  iteration reads one of two copies of `args` picked by the loop index, so
  XLA cannot hoist the call out of the loop."""
  pair = jax.tree.map(lambda x: jnp.stack([x, x]), args)

  @jax.jit
  def run(pair):
    pick = lambda i: jax.tree.map(lambda x: x[i % 2], pair)
    out = fn(*pick(0))
    return jax.lax.fori_loop(1, inner + 1, lambda i, _: fn(*pick(i)), out)

  jax.block_until_ready(run(pair))
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(run(pair))
    times.append((time.perf_counter() - t0) / (inner + 1))
  return statistics.median(times)


def anatomy(label: str, env: envs.Env, batch: int, repeats: int) -> None:
  game = env.game
  key = jax.random.PRNGKey(0)
  s = mixed_states(env, batch, 7, key)
  a = random_action(s, jax.random.PRNGKey(1))
  keys = jax.random.split(jax.random.PRNGKey(2), batch)
  decision = jnp.maximum(s.current_player, 0)
  n_chance = int(jnp.sum(s.current_player == envs.CHANCE))
  n_dec = int(jnp.sum(s.current_player >= 0))
  print(
    f"\n== {label}: batch {batch} ({n_dec} decision, {n_chance} chance nodes), "
    f"{env.num_actions} actions, {env.num_chance_outcomes} outcomes, "
    f"observation {env.observation_shape}"
  )

  # Jaxpr size of one unbatched step.
  s1 = jax.tree.map(lambda x: x[0], s)
  rows: List[Tuple[str, Callable, Tuple]] = [
    ("step (explicit)", env.step, (s1, a[0])),
    ("step (keyed)", env.step, (s1, a[0], keys[0])),
    ("init", env.init, (keys[0],)),
    ("reset", env.reset, (keys[0],)),
  ]
  print(f"{'jaxpr of one unbatched':<24}{'eqns':>7}  control flow and heavy primitives")
  for name, fn, args in rows:
    counts = count_eqns(jax.make_jaxpr(fn)(*args))
    heavy = ", ".join(f"{p} {counts[p]}" for p in CONTROL_FLOW if counts[p])
    print(f"{name:<24}{sum(counts.values()):>7}  {heavy}")

  # XLA cost analysis of the batched step.
  print(f"{'XLA cost of jit(vmap)':<24}{'Mflop':>9}{'MB accessed':>13}")
  for name, fn, args in [
    ("step (explicit)", jax.vmap(env.step), (s, a)),
    ("step (keyed)", jax.vmap(env.step), (s, a, keys)),
  ]:
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    cost = cost or {}
    print(
      f"{name:<24}{cost.get('flops', float('nan')) / 1e6:>9.1f}"
      f"{cost.get('bytes accessed', float('nan')) / 1e6:>13.1f}"
    )

  # Wall time of each part.
  g = s.game
  parts: List[Tuple[str, Callable, Tuple]] = [
    ("step (explicit)", jax.vmap(env.step), (s, a)),
    ("step (keyed)", jax.vmap(env.step), (s, a, keys)),
    ("init", jax.vmap(env.init), (keys,)),
    ("reset", jax.vmap(env.reset), (keys,)),
    ("game.apply_action", jax.vmap(game.apply_action), (g, jnp.clip(a, 0, env.num_actions - 1))),
    (
      "game.apply_chance",
      jax.vmap(game.apply_chance),
      (g, jnp.clip(a, 0, env.num_chance_outcomes - 1)),
    ),
    ("game.legal_action_mask", jax.vmap(game.legal_action_mask), (g,)),
    ("game.chance_probs", jax.vmap(game.chance_probs), (g,)),
    ("game.current_player", jax.vmap(game.current_player), (g,)),
    ("game.observe", jax.vmap(game.observe), (g, decision)),
    ("random action (harness)", random_action, (s, jax.random.PRNGKey(3))),
  ]
  base = None
  print(f"{'wall time of jit(vmap)':<24}{'ms':>9}{'ns/lane':>9}{'of step':>9}")
  for name, fn, args in parts:
    try:
      t = timed(fn, args, repeats)
    except ValueError as e:  # e.g. apply_chance of an adapter whose chance is hidden
      print(f"{name:<24}{'n/a':>9}  ({str(e).split(';')[0]})")
      continue
    base = base or t
    print(f"{name:<24}{t * 1e3:>9.3f}{t / batch * 1e9:>9.0f}{t / base:>8.2f}x")


def fusion_profile(env: envs.Env, batch: int, top: int, steps: int = 8) -> None:
  """Prints the `top` costliest XLA ops of `steps` iterations of the keyed
  random-play loop, from a profiler trace (ms per iteration, share)."""

  def fresh(k):
    return jax.vmap(env.reset)(jax.random.split(k, batch))

  @jax.jit
  def run(key):
    def body(i, s):
      ka, ks, kr = jax.random.split(jax.random.fold_in(key, i), 3)
      a = random_legal_action(s.legal_action_mask, ka)
      s = jax.vmap(env.step)(s, a, jax.random.split(ks, batch))
      done = s.done
      return jax.tree.map(
        lambda f, x: jnp.where(done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh(kr), s
      )

    return jax.lax.fori_loop(0, steps, body, fresh(key)).observation.sum()

  jax.block_until_ready(run(jax.random.PRNGKey(0)))
  with tempfile.TemporaryDirectory() as tmp:
    with jax.profiler.trace(tmp, create_perfetto_trace=True):
      jax.block_until_ready(run(jax.random.PRNGKey(1)))
    path = glob.glob(f"{tmp}/**/*.trace.json.gz", recursive=True)
    trace = json.load(gzip.open(path[0])) if path else {}
  events = trace.get("traceEvents", []) if isinstance(trace, dict) else trace
  total, calls = collections.Counter(), collections.Counter()
  for e in events:
    name = e.get("name", "")
    # XLA's ops only: not the runtime's wrappers nor Python frames.
    if e.get("ph") == "X" and not name.startswith(("$", "ThunkExecutor", "Pjit", "Execute")):
      total[name] += e.get("dur", 0)
      calls[name] += 1
  if not total:
    print("(the profiler trace held no XLA op events)")
    return
  loop = sum(total.values())
  print(f"{'costliest XLA ops of the keyed loop':<40}{'ms/iter':>9}{'share':>8}{'calls':>7}")
  for name, us in total.most_common(top):
    print(f"{name[:40]:<40}{us / 1e3 / steps:>9.3f}{us / loop:>8.1%}{calls[name]:>7}")


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  choices = list(envs.registered()) + list(VARIANTS)
  parser.add_argument(
    "--env", nargs="*", default=None, help=f"games to dissect (default: all of {choices})"
  )
  parser.add_argument("--batch", type=int, default=4096)
  parser.add_argument("--repeats", type=int, default=20)
  parser.add_argument(
    "--fusions",
    type=int,
    default=0,
    metavar="N",
    help="also print the N costliest XLA ops of the keyed random-play loop (profiler trace)",
  )
  try:
    args = parser.parse_args(argv)
  except SystemExit as e:
    return int(e.code or 0)
  names = args.env or choices
  bad = [n for n in names if n not in choices]
  if bad or args.batch < 1 or args.repeats < 1 or args.fusions < 0:
    print(
      f"error: unknown env(s) {bad}; valid: {choices}"
      if bad
      else "error: --batch and --repeats must be >= 1, --fusions >= 0",
      file=sys.stderr,
    )
    return 2
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}")
  for label in names:
    name, params = VARIANTS.get(label, (label, {}))
    env = envs.make(name, **params)
    anatomy(label, env, args.batch, args.repeats)
    if args.fusions:
      fusion_profile(env, args.batch, args.fusions)
  return 0


if __name__ == "__main__":
  sys.exit(main())
