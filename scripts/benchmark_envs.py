"""Random-play throughput of every registered game, beside peer implementations.

Ours: jit + vmap random play (`env.step(state, action, key)`, chance sampled
inside), in env steps per second (decision steps, the unit peers count), at
several batch sizes. Peers, measured in the same run: OpenSpiel in a Python
loop (and gymnax for Catch), at batch 1. Medians over repeats.

    python scripts/benchmark_envs.py                 # all games
    python scripts/benchmark_envs.py --env catch --batch 1 64 --repeats 3

This is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.testing import batched_random_action

# name -> [(label, game string for pyspiel.load_game)] : OpenSpiel peers run in
# a Python loop with random legal actions and sampled chance outcomes.
OPENSPIEL_PEERS: Dict[str, List[Tuple[str, str]]] = {
  "catch": [("OpenSpiel catch", "catch(rows=10,columns=5)")],
  "nannon": [("OpenSpiel backgammon (different game)", "backgammon")],
  "breakthrough": [("OpenSpiel breakthrough 5x5", "breakthrough(rows=5,columns=5)")],
  "einstein": [("OpenSpiel einstein_wurfelt_nicht", "einstein_wurfelt_nicht")],
}


def ours(env: envs.Env, batch: int, num_steps: int, repeats: int) -> float:
  """Median env steps/s of jit+vmap random play over `repeats` timed runs.

  Chance is explicit: at a chance node the "action" is an outcome drawn from
  `chance_probs`. Only decision steps are counted, as for the peers.
  """

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, batch))

    def body(carry, k):
      s, n, chk = carry
      ka, kr = jax.random.split(k)
      a = batched_random_action(ka, s)
      n = n + jnp.sum(s.current_player >= 0)
      # Consume what an agent reads, so XLA cannot drop it as dead code.
      chk = chk + jnp.sum(s.observation) + jnp.sum(s.rewards)
      s = jax.vmap(env.step)(s, a)

      # Restart finished games so every slot keeps playing (only computed
      # when some game has finished).
      def restart(s):
        fresh = jax.vmap(env.init)(jax.random.split(kr, batch))
        return jax.tree.map(
          lambda f, x: jnp.where(s.done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, s
        )

      s = jax.lax.cond(jnp.any(s.done), restart, lambda s: s, s)
      return (s, n, chk), None

    (_, n, chk), _ = jax.lax.scan(
      body, (s, jnp.int32(0), jnp.float32(0)), jax.random.split(k1, num_steps)
    )
    return n, chk

  jax.block_until_ready(run(jax.random.key(0)))  # compile
  rates = []
  for r in range(repeats):
    t0 = time.perf_counter()
    n = int(jax.block_until_ready(run(jax.random.key(r + 1)))[0])
    rates.append(n / (time.perf_counter() - t0))
  return statistics.median(rates)


def openspiel_rate(game_string: str, num_steps: int, repeats: int) -> float:
  """Median env steps/s (decision steps) of OpenSpiel random play in Python."""
  import pyspiel  # pylint: disable=import-outside-toplevel

  game = pyspiel.load_game(game_string)
  rng = np.random.default_rng(0)
  rates = []
  for _ in range(repeats):
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
    rates.append(steps / (time.perf_counter() - t0))
  return statistics.median(rates)


def gymnax_catch_rate(batch: int, num_steps: int, repeats: int) -> float:
  """Median env steps/s of gymnax Catch-bsuite, jit + vmap, auto-reset."""
  import gymnax  # pylint: disable=import-outside-toplevel

  genv, params = gymnax.make("Catch-bsuite")

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    _, s = jax.vmap(genv.reset, in_axes=(0, None))(jax.random.split(k0, batch), params)

    def body(carry, k):
      s, chk = carry
      ka, ks = jax.random.split(k)
      a = jax.random.randint(ka, (batch,), 0, 3)
      obs, s, r, _, _, _ = jax.vmap(genv.step, in_axes=(0, 0, 0, None))(
        jax.random.split(ks, batch), s, a, params
      )
      return (s, chk + jnp.sum(obs) + jnp.sum(r)), None

    (s, chk), _ = jax.lax.scan(body, (s, jnp.float32(0)), jax.random.split(k1, num_steps))
    return s.time, chk

  jax.block_until_ready(run(jax.random.key(0)))
  rates = []
  for r in range(repeats):
    t0 = time.perf_counter()
    jax.block_until_ready(run(jax.random.key(r + 1)))
    rates.append(batch * num_steps / (time.perf_counter() - t0))
  return statistics.median(rates)


# Extra rows at non-default parameters, printed when their game is run:
# label -> (registered name, params, OpenSpiel peer game string or None).
VARIANTS: Dict[str, Tuple[str, Dict[str, object], Optional[str]]] = {
  "breakthrough 8x8": ("breakthrough", {"rows": 8, "columns": 8}, "breakthrough"),
}

# name -> [(label, fn(batch, num_steps, repeats) -> steps/s)] : JAX peers.
JAX_PEERS: Dict[str, List[Tuple[str, Callable[[int, int, int], float]]]] = {
  "catch": [("gymnax Catch-bsuite", gymnax_catch_rate)],
}


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument(
    "--env", nargs="*", default=None, help=f"games to run (default: all of {envs.registered()})"
  )
  parser.add_argument("--batch", type=int, nargs="*", default=[1, 64, 1024, 4096])
  parser.add_argument("--steps", type=int, default=200, help="scan length of one timed jitted run")
  parser.add_argument(
    "--peer-steps", type=int, default=20000, help="decision steps per OpenSpiel timing"
  )
  parser.add_argument("--repeats", type=int, default=5)
  args = parser.parse_args()
  names = args.env or list(envs.registered())
  for name in names:
    if name not in envs.registered():
      parser.error(f"unknown env {name!r}; registered: {envs.registered()}")

  print(
    f"jax {jax.__version__} on {jax.devices()[0].platform}; "
    f"median of {args.repeats} runs; env steps/s (decision steps)\n"
  )
  header = f"{'game':<18}{'implementation':<40}{'batch':>7}{'steps/s':>14}{'ratio':>9}"
  print(header)
  print("-" * len(header))
  rows = [
    (name, name, {}, OPENSPIEL_PEERS.get(name, []), JAX_PEERS.get(name, [])) for name in names
  ]
  rows += [
    (label, name, params, [(f"OpenSpiel {label}", peer)] if peer else [], [])
    for label, (name, params, peer) in VARIANTS.items()
    if name in names
  ]
  for row_label, name, params, os_peers, jax_peers in rows:
    env = envs.make(name, **params)
    peer_rates = []
    for label, game_string in os_peers:
      peer_rates.append((label, 1, openspiel_rate(game_string, args.peer_steps, args.repeats)))
    for label, fn in jax_peers:
      for b in args.batch:
        peer_rates.append((label, b, fn(b, args.steps, args.repeats)))
    base = peer_rates[0][2] if peer_rates else None
    for b in args.batch:
      rate = ours(env, b, args.steps, args.repeats)
      ratio = f"{rate / base:8.1f}x" if base else "       -"
      print(f"{row_label:<18}{'anakin-mz envs (jit+vmap)':<40}{b:>7}{rate:>14,.0f}{ratio}")
    for label, b, rate in peer_rates:
      ratio = f"{rate / base:8.1f}x" if base else "       -"
      print(f"{'':<18}{label:<40}{b:>7}{rate:>14,.0f}{ratio}")
  print(
    "\nratio: steps/s relative to the first peer row of the game (OpenSpiel, batch 1, Python loop)."
  )


if __name__ == "__main__":
  main()
