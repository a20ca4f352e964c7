"""Random-play throughput of every registered game, beside peers, in one run.

Every JAX implementation runs in the same jitted `fori_loop` at one batch
size: a uniformly random legal move per lane, one step, then a fresh game
selected (`where(done, reset, state)`) in every lane that finished. Ours is
measured two ways:

* keyed: `env.step(state, action, key)` samples the chance that follows and
  the fresh game is `env.reset(key)` (the form pgx and gymnax users call);
* explicit: `env.step(state, action)`, the harness drawing each chance
  outcome from `chance_probs`, the fresh game `env.init(key)`.

Both count decision steps only (the unit the peers count). Peers measured in
the same run: pgx connect_four and backgammon (for scale), gymnax
Catch-bsuite (its `step` resets finished games itself), and OpenSpiel in a
Python loop at batch 1. Each figure is the median over `--repeats`
round-robin passes (every implementation of a game timed once per pass), so
ratios compare numbers taken under the same load.

    taskset -c 1 python scripts/benchmark_envs.py
    taskset -c 1 python scripts/benchmark_envs.py --env catch nannon --batch 1024 --repeats 3

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.policy import random_legal_action

# label -> (registered name, params, OpenSpiel game string or None).
GAMES: Dict[str, Tuple[str, Dict[str, object], Optional[str]]] = {
  "catch": ("catch", {}, "catch(rows=10,columns=5)"),
  "nannon": ("nannon", {}, "backgammon"),
  "einstein": ("einstein", {}, "einstein_wurfelt_nicht"),
  "breakthrough": ("breakthrough", {}, "breakthrough(rows=5,columns=5)"),
  "breakthrough_8x8": ("breakthrough", {"rows": 8, "columns": 8}, "breakthrough"),
  "carchess": ("carchess", {}, None),
}
PGX_PEERS = ("connect_four", "backgammon")


def where_done(done: jax.Array, fresh, state):
  return jax.tree.map(
    lambda f, x: jnp.where(done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, state
  )


def loop(
  batch: int,
  steps: int,
  init: Callable,
  step: Callable,
  mask: Callable,
  done: Callable,
  decisions: Callable,
  out: Callable,
):
  """A jitted function key -> (decision steps, checksum) of the common
  harness: `steps` iterations of random legal move, `step`, reset-select.

  init(keys) -> state; step(state, action, keys, key) -> state;
  mask(state) -> bool [B, A]; done(state) -> bool [B];
  decisions(state) -> int32 [B] decision steps taken by the next step;
  out(state) -> an array the checksum reads (the observation)."""

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = init(jax.random.split(k0, batch))

    def body(i, carry):
      s, n = carry
      ka, ks, kr = jax.random.split(jax.random.fold_in(k1, i), 3)
      n = n + jnp.sum(decisions(s))
      a = random_legal_action(mask(s), ka)
      s = step(s, a, jax.random.split(ks, batch), ks)
      s = where_done(done(s), init(jax.random.split(kr, batch)), s)
      return s, n

    s, n = jax.lax.fori_loop(0, steps, body, (s, jnp.int32(0)))
    return n, jnp.sum(out(s))

  return run


def ours_keyed(env: envs.Env, batch: int, steps: int):
  return loop(
    batch,
    steps,
    jax.vmap(env.reset),
    lambda s, a, keys, _: jax.vmap(env.step)(s, a, keys),
    lambda s: s.legal_action_mask,
    lambda s: s.done,
    lambda s: (s.current_player >= 0).astype(jnp.int32),
    lambda s: s.observation,
  )


def ours_explicit(env: envs.Env, batch: int, steps: int):

  def step(s, a, _, key):
    outcome = envs.chance_outcome(s, key)
    return jax.vmap(env.step)(s, jnp.where(s.current_player == envs.CHANCE, outcome, a))

  return loop(
    batch,
    steps,
    jax.vmap(env.init),
    step,
    lambda s: s.legal_action_mask,
    lambda s: s.done,
    lambda s: (s.current_player >= 0).astype(jnp.int32),
    lambda s: s.observation,
  )


def pgx_keyed(name: str, batch: int, steps: int):
  import pgx  # pylint: disable=import-outside-toplevel

  env = pgx.make(name)
  return loop(
    batch,
    steps,
    jax.vmap(env.init),
    lambda s, a, keys, _: jax.vmap(env.step)(s, a, keys),
    lambda s: s.legal_action_mask,
    lambda s: s.terminated | s.truncated,
    lambda s: jnp.ones_like(s.current_player, jnp.int32),
    lambda s: s.observation,
  )


def gymnax_catch(batch: int, steps: int):
  """gymnax Catch-bsuite in the same loop: its `step` already resets a
  finished game (reset_env + select), so the harness' select is idle."""
  import gymnax  # pylint: disable=import-outside-toplevel

  genv, params = gymnax.make("Catch-bsuite")

  def init(keys):
    obs, s = jax.vmap(genv.reset, in_axes=(0, None))(keys, params)
    return s, obs

  def step(carry, a, keys, _):
    out = jax.vmap(genv.step, in_axes=(0, 0, 0, None))(keys, carry[0], a, params)
    return out[1], out[0]  # (state, observation)

  return loop(
    batch,
    steps,
    init,
    step,
    lambda c: jnp.ones((c[1].shape[0], 3), bool),
    lambda c: jnp.zeros((c[1].shape[0],), bool),
    lambda c: jnp.ones((c[1].shape[0],), jnp.int32),
    lambda c: c[1],
  )


def openspiel_rate(game_string: str, num_steps: int) -> float:
  """Decision steps/s of OpenSpiel random play in a Python loop (batch 1)."""
  import pyspiel  # pylint: disable=import-outside-toplevel

  game = pyspiel.load_game(game_string)
  rng = np.random.default_rng(0)
  steps = 0
  state = game.new_initial_state()
  t0 = time.perf_counter()
  while steps < num_steps:
    if state.is_terminal():
      state = game.new_initial_state()
    elif state.is_chance_node():
      outcomes, probs = zip(*state.chance_outcomes())
      state.apply_action(outcomes[rng.choice(len(outcomes), p=probs)])
    else:
      legal = state.legal_actions()
      state.apply_action(legal[rng.integers(len(legal))])
      steps += 1
  return steps / (time.perf_counter() - t0)


def timer(run) -> Callable[[int], float]:
  """Compiles `run` and returns seed -> steps/s of one timed call."""
  jax.block_until_ready(run(jax.random.PRNGKey(0)))

  def once(seed: int) -> float:
    t0 = time.perf_counter()
    n, _ = jax.block_until_ready(run(jax.random.PRNGKey(seed)))
    return int(n) / (time.perf_counter() - t0)

  return once


def main(argv: Optional[Sequence[str]] = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--env",
    nargs="*",
    default=None,
    metavar="GAME",
    help=f"games to run (default: all of {list(GAMES)})",
  )
  parser.add_argument("--batch", type=int, default=4096)
  parser.add_argument(
    "--steps", type=int, default=32, help="loop iterations of one timed jitted run"
  )
  parser.add_argument(
    "--repeats", type=int, default=5, help="round-robin passes; figures are their medians"
  )
  parser.add_argument(
    "--peer-steps", type=int, default=5000, help="decision steps per OpenSpiel timing"
  )
  parser.add_argument("--no-pgx", action="store_true", help="skip the pgx rows")
  parser.add_argument("--no-openspiel", action="store_true", help="skip the OpenSpiel rows")
  try:
    args = parser.parse_args(argv)
  except SystemExit as e:
    return int(e.code or 0)
  names = args.env or list(GAMES)
  bad = [n for n in names if n not in GAMES]
  if bad:
    print(f"error: unknown game(s) {bad}; valid: {list(GAMES)}", file=sys.stderr)
    return 2
  if min(args.batch, args.steps, args.repeats, args.peer_steps) < 1:
    print("error: --batch, --steps, --repeats and --peer-steps must be >= 1", file=sys.stderr)
    return 2

  b, t = args.batch, args.steps
  runs: Dict[str, Callable[[int], float]] = {}  # row label -> timer
  print(
    f"jax {jax.__version__} on {jax.devices()[0].platform}; batch {b}, "
    f"{t} loop iterations a run, median of {args.repeats} round-robin "
    "passes; decision steps/s",
    flush=True,
  )
  if not args.no_pgx:
    for name in PGX_PEERS:
      runs[f"pgx {name}"] = timer(pgx_keyed(name, b, t))
  if "catch" in names:
    runs["gymnax Catch-bsuite"] = timer(gymnax_catch(b, t))
  for label in names:
    name, params, _ = GAMES[label]
    env = envs.make(name, **params)
    runs[f"{label} keyed"] = timer(ours_keyed(env, b, t))
    runs[f"{label} explicit"] = timer(ours_explicit(env, b, t))
  os_games = (
    {} if args.no_openspiel else {label: GAMES[label][2] for label in names if GAMES[label][2]}
  )

  rates: Dict[str, List[float]] = {
    k: [] for k in list(runs) + [f"OpenSpiel {s}" for s in os_games.values()]
  }
  for r in range(args.repeats):
    for label, once in runs.items():
      rates[label].append(once(r + 1))
    for game_string in os_games.values():
      rates[f"OpenSpiel {game_string}"].append(openspiel_rate(game_string, args.peer_steps))
  med = {k: statistics.median(v) for k, v in rates.items()}

  def ratio(a: str, b: str) -> str:
    return f"{med[a] / med[b]:7.2f}x" if a in med and b in med else "       -"

  c4 = "pgx connect_four"
  header = (
    f"{'game':<18}{'keyed':>12}{'explicit':>12}{'keyed/expl':>11}"
    f"{'vs OpenSpiel':>13}{'vs pgx c4':>11}  OpenSpiel peer"
  )
  print()
  print(header)
  print("-" * len(header))
  for label in names:
    k, e = f"{label} keyed", f"{label} explicit"
    peer = GAMES[label][2]
    os_key = f"OpenSpiel {peer}" if peer else None
    print(
      f"{label:<18}{med[k]:>12,.0f}{med[e]:>12,.0f}{ratio(k, e):>11}"
      f"{ratio(k, os_key) if os_key in med else '       -':>13}"
      f"{ratio(k, c4):>11}  " + (f"{peer}: {med[os_key]:,.0f}" if os_key in med else "-")
    )
  print()
  for label in list(runs)[:3]:
    if not label.endswith(("keyed", "explicit")):
      print(f"{label:<30}{med[label]:>12,.0f}")
  if "catch" in names:
    print(
      f"catch keyed / gymnax Catch-bsuite: {ratio('catch keyed', 'gymnax Catch-bsuite').strip()}"
    )
  if "nannon" in names and "pgx backgammon" in med:
    print(f"nannon keyed / pgx backgammon: {ratio('nannon keyed', 'pgx backgammon').strip()}")
  print(
    "\nkeyed: env.step(state, action, key) + env.reset; explicit: env.step(state, "
    "action) with chance drawn by the harness + env.init. vs OpenSpiel: keyed "
    "(batch, JAX) over OpenSpiel (batch 1, Python loop); vs pgx c4: keyed over "
    "pgx connect_four in the same loop."
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
