"""Search throughput: NDMZ search (anakin_mz.core.search) beside mctx.muzero_policy.

Both searches use the same small flax MLP (h, g, f; SELU, two hidden layers)
and the same batch and number of simulations, and are timed in the same run:
jit, one warm-up call, then the median over repeats of a blocking call (the
two searches alternate, so a change of machine load hits both).
Simulations/s = batch * num_simulations / seconds, by wall clock and by
process CPU time (the steadier figure on a shared, loaded machine); the ratio
is NDMZ / MuZero throughput.

    /tmp/venv/bin/python scripts/benchmark_search.py
    /tmp/venv/bin/python scripts/benchmark_search.py --batch 64 256 \\
        --simulations 50 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import flax.linen as nn
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.search import SearchConfig, ndmz_search
from anakin_mz.core.types import ModelOutput


class _MLP(nn.Module):
  hidden: tuple
  out: int

  @nn.compact
  def __call__(self, x):
    for width in self.hidden:
      x = nn.selu(nn.Dense(width, kernel_init=nn.initializers.lecun_normal())(x))
    return nn.Dense(self.out)(x)


class _Model(nn.Module):
  """h, g, f of a tiny MuZero-style model with NDMZ heads."""

  num_actions: int
  num_outcomes: int
  num_players: int
  latent: int = 64
  hidden: tuple = (256, 256)

  def setup(self):
    a, c, p = self.num_actions, self.num_outcomes, self.num_players
    self.h = _MLP(self.hidden, self.latent)
    self.g = _MLP(self.hidden, self.latent + 1 + p + 2)
    self.f = _MLP(self.hidden, a + c + 1)

  def predict(self, latent):
    a, c = self.num_actions, self.num_outcomes
    out = self.f(latent)
    return out[:, :a], out[:, a : a + c], out[:, -1]

  def root(self, obs):
    latent = self.h(obs)
    policy, chance, value = self.predict(latent)
    b = obs.shape[0]
    return ModelOutput(
      reward=jnp.zeros(b),
      value=value,
      policy_logits=policy,
      chance_logits=chance,
      identity_logits=jnp.zeros((b, self.num_players + 2)),
      embedding=latent,
    )

  def recurrent(self, action, latent):
    onehot = jax.nn.one_hot(action, self.num_actions + self.num_outcomes)
    out = self.g(jnp.concatenate([latent, onehot], axis=-1))
    new_latent = out[:, : self.latent]
    policy, chance, value = self.predict(new_latent)
    return ModelOutput(
      reward=out[:, self.latent],
      value=value,
      policy_logits=policy,
      chance_logits=chance,
      identity_logits=out[:, self.latent + 1 :],
      embedding=new_latent,
    )

  def __call__(self, obs, action):
    out = self.root(obs)
    return self.recurrent(action, out.embedding)


def _time_pair(fns, args, repeats):
  """Median wall and process-CPU seconds of each fn; the calls alternate so
  that a change of machine load hits both."""
  for fn in fns:
    jax.block_until_ready(fn(*args))  # compile + warm-up
  wall, cpu = [[] for _ in fns], [[] for _ in fns]
  for _ in range(repeats):
    for i, fn in enumerate(fns):
      w, c = time.perf_counter(), time.process_time()
      jax.block_until_ready(fn(*args))
      wall[i].append(time.perf_counter() - w)
      cpu[i].append(time.process_time() - c)
  return ([statistics.median(t) for t in wall], [statistics.median(t) for t in cpu])


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--batch", type=int, nargs="+", default=[64, 256])
  parser.add_argument("--simulations", type=int, default=50)
  parser.add_argument("--repeats", type=int, default=5)
  parser.add_argument("--num-actions", type=int, default=9)
  parser.add_argument("--num-outcomes", type=int, default=6)
  parser.add_argument("--num-players", type=int, default=2)
  parser.add_argument("--obs-dim", type=int, default=32)
  args = parser.parse_args(argv)
  if args.simulations < 1 or args.repeats < 1 or min(args.batch) < 1:
    parser.error("--batch, --simulations and --repeats must be >= 1")

  a, c, p = args.num_actions, args.num_outcomes, args.num_players
  model = _Model(a, c, p)
  params = model.init(
    jax.random.PRNGKey(0), jnp.zeros((1, args.obs_dim)), jnp.zeros((1,), jnp.int32)
  )
  config = SearchConfig(num_simulations=args.simulations)

  def ndmz_recurrent(params, rng_key, action, embedding):
    del rng_key
    return model.apply(params, action, embedding, method=_Model.recurrent)

  def muzero_recurrent(params, rng_key, action, embedding):
    del rng_key
    out = model.apply(params, action, embedding, method=_Model.recurrent)
    return mctx.RecurrentFnOutput(
      reward=out.reward,
      discount=-jnp.ones_like(out.reward),
      prior_logits=out.policy_logits,
      value=out.value,
    ), out.embedding

  @jax.jit
  def run_ndmz(params, key, obs, legal):
    root = model.apply(params, obs, method=_Model.root)
    out = ndmz_search(
      params, key, root, ndmz_recurrent, legal, num_players=p, payoff="zero_sum", config=config
    )
    return out.action, out.action_weights

  @jax.jit
  def run_muzero(params, key, obs, legal):
    root = model.apply(params, obs, method=_Model.root)
    out = mctx.muzero_policy(
      params,
      key,
      mctx.RootFnOutput(
        prior_logits=root.policy_logits, value=root.value, embedding=root.embedding
      ),
      muzero_recurrent,
      num_simulations=args.simulations,
      invalid_actions=(~legal).astype(jnp.float32),
      dirichlet_fraction=config.dirichlet_fraction,
      dirichlet_alpha=config.dirichlet_alpha,
    )
    return out.action, out.action_weights

  print(
    f"device: {jax.devices()[0].device_kind} ({jax.default_backend()}); "
    f"MLP latent 64, hidden 2x256, A={a}, C={c}, P={p}; "
    f"{args.simulations} simulations; median of {args.repeats}"
  )
  print(
    "sims/s = batch * simulations / median seconds; 'cpu' divides by "
    "the process CPU seconds instead of wall (steadier on a loaded "
    "machine)"
  )
  print(
    f"{'batch':>6} {'ndmz sims/s':>12} {'muzero sims/s':>14} "
    f"{'ratio':>6} | {'ndmz cpu':>9} {'muzero cpu':>11} {'ratio':>6}"
  )
  for batch in args.batch:
    key = jax.random.PRNGKey(batch)
    obs = jax.random.normal(key, (batch, args.obs_dim))
    legal = jax.random.uniform(key, (batch, a)) < 0.7
    legal = legal.at[:, 0].set(True)
    (w_ndmz, w_muzero), (c_ndmz, c_muzero) = _time_pair(
      (run_ndmz, run_muzero), (params, key, obs, legal), args.repeats
    )
    sims = batch * args.simulations
    print(
      f"{batch:>6} {sims / w_ndmz:>12,.0f} {sims / w_muzero:>14,.0f} "
      f"{w_muzero / w_ndmz:>6.2f} | {sims / c_ndmz:>9,.0f} "
      f"{sims / c_muzero:>11,.0f} {c_muzero / c_ndmz:>6.2f}"
    )
  return 0


if __name__ == "__main__":
  sys.exit(main())
