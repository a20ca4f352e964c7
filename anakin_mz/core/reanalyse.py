"""Reanalyse inside the jitted Anakin step (MuZero Reanalyse, Schrittwieser
et al. 2021): `train.reanalyse_rows` = R samples of each update batch of N
(`train.reanalyse_fraction` of it) get fresh targets from a search with the
current parameters, in the same compiled program as self-play and learning.
They are spread evenly over the batch, rows `floor(r N / R)` for r < R
(`reanalysed_rows`): the rows are stratified by lane (`replay.sample_starts`),
so every block of lanes, and so every device, reanalyses its share (the
first R rows would all come from the first lanes, one device's).

What "fresh" means with K unroll steps. A sample starting at step t reads the
targets of the steps t..t+K (`replay.targets_at`); the self-play search of the
time, with the parameters of the time, set the search ones:

* policy: at each unrolled decision step t+k the search runs again on the
  step's stored observation with its stored legal moves (the buffer keeps
  them, `replay.example_transition(env, legal_mask=True)`), and its
  `action_weights` (visit distribution, or Gumbel's completed-Q policy)
  replace the stored ones. Shapes are static: all K+1 steps of a sample are
  searched, and a result is used only where the policy target is
  (`policy_mask`: a decision step before the episode's end).
* value with `td_steps = n > 0`: the n-step target bootstraps from the stored
  search value V_b of one step b: the first decision step at or after t+k+n
  in the episode, or, where the data stops first (write head, truncation),
  the last decision step before the stop (`replay._returns`). The target is
  linear in V_b with coefficient discount^(b-t-k), so the fresh target is the
  stored one plus discount^(b-t-k) (V'_b - V_b), V'_b the root value of a
  fresh search at b, seen from the start's mover. That is K+1 more searches
  per sample.
* value with `td_steps = 0` (Monte-Carlo, every game's default): the target
  is the game's outcome, which no search changes, so only the policy target
  is refreshed and no value search runs. (Where the data stops before the
  episode ends, replay stands a stored search value in for the rest of the
  game; those stand-ins, in each lane's newest game, are kept as stored.)
* rewards, next movers and chance probabilities are facts of the game: kept.

The search is self-play's, as configured (root noise included, temperature
1), so a reanalysed target differs from the stored one only by the
parameters that made it. Each row searches its roots alone with its own key,
folded from the update's key and its global row (`jax.random.fold_in(key,
row)`), so a row's fresh targets do not depend on the device layout; the
batch itself (starts, actions) is the one `replay.sample_starts` drew.

Cost: each update runs R searches of K+1 roots each (2 (K+1) with
`td_steps > 0`), R = `reanalyse_rows`. With `reanalyse_fraction = 0` nothing
here runs (a static check), and the buffer keeps no legal masks, so the
compiled step is the plain one.
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from anakin_mz.core import replay as replay_lib
from anakin_mz.core.networks import Network
from anakin_mz.core.search import SearchConfig, ndmz_search
from anakin_mz.core.types import Params


def reanalysed_rows(batch_size: int, rows: int, num_shards: int = 1) -> np.ndarray:
  """int `[R / S]`: the reanalysed rows of a shard's `batch_size / S` rows,
  counted from the shard's first (the same for every shard): the rows
  `floor(r N / R)`, r < R, spread evenly over the batch.

  Raises:
    ValueError: R does not split evenly over the S shards (devices).
  """
  if rows % num_shards:
    raise ValueError(
      f"train.reanalyse_fraction gives {rows} reanalysed samples per batch, which do not "
      f"split over {num_shards} devices: choose a fraction whose samples are a multiple of "
      f"{num_shards}"
    )
  per_shard = rows // num_shards
  return (np.arange(per_shard) * batch_size) // rows


def refresh(
  params: Params,
  prepared: replay_lib.Prepared,
  batch: replay_lib.Batch,
  starts: replay_lib.Starts,
  key: chex.PRNGKey,
  *,
  network: Network,
  env: envs.Env,
  search: SearchConfig,
  num_rows: int,
  td_steps: int,
  discount: float,
  num_shards: int = 1,
) -> replay_lib.Batch:
  """`batch` with fresh targets in its reanalysed rows (module docstring).

  Args:
    params: the current network parameters (the search's).
    prepared: what `batch` was drawn from; its buffer must keep legal masks.
    batch: `replay.targets_at(prepared, starts, ...)`, `[n, K+1]`: all N rows
      of the batch, or one shard's N/S.
    starts: the starts `batch` was built from (`replay.sample_starts`).
    key: the update's key (each row's search key is folded from it).
    network, env: the model and the game.
    search: the run's search settings (self-play's, `config.search`).
    num_rows: R, the reanalysed samples of the whole batch
      (`train.reanalyse_rows`); 0: none.
    td_steps: the value targets' bootstrap (`train.td_steps`; 0: the outcome).
    discount: the return's discount (`config.discount`).
    num_shards: S, the shards (devices) the batch is split over.

  Returns:
    The batch with `target_policy` (and with `td_steps > 0` `target_value`)
    of the reanalysed rows from the fresh search; with R = 0, `batch` itself.
  """
  if num_rows == 0:
    return batch
  n, k1 = batch.target_value.shape
  batch_size = n * num_shards
  if num_rows > batch_size:
    raise ValueError(f"{num_rows} reanalysed samples of a batch of {batch_size}")
  data = prepared.buffer.data
  if data.legal_action_mask is None:
    raise ValueError(
      "reanalyse needs the legal moves of the stored steps: build the buffer "
      "with replay.example_transition(env, legal_mask=True)"
    )
  picked = jnp.asarray(reanalysed_rows(batch_size, num_rows, num_shards))  # [R/S] local rows
  cap = prepared.buffer.capacity
  i, lane = starts.i[picked], starts.lane[picked, None]
  pos = jnp.minimum(i[:, None] + jnp.arange(k1), cap - 1)  # [R, K+1] logical
  alive = i[:, None] + jnp.arange(k1) <= prepared.end[i, lane[:, 0]][:, None]
  policy_mask = batch.policy_mask[picked]
  steps, use = [pos], [policy_mask]
  if td_steps > 0:
    boot, has_boot = _bootstrap_steps(prepared, pos, lane, alive, td_steps)
    steps.append(boot)
    use.append(has_boot)
  steps, use = jnp.concatenate(steps, axis=1), jnp.concatenate(use, axis=1)  # [R, J]

  slot = prepared.phys[steps, lane]
  legal = jnp.where(use[..., None], data.legal_action_mask[slot, lane], True)
  observation = data.observation[slot, lane]

  def search_row(obs, mask, k):
    """Row's J roots, searched together with the row's own key."""
    return ndmz_search(
      params,
      k,
      network.root(params, obs),
      network.recurrent,
      mask,
      num_players=env.num_players,
      payoff=env.payoff,
      config=search,
      temperature=1.0,
    )

  row_keys = jax.vmap(lambda r: jax.random.fold_in(key, r))(starts.row[picked])
  out = jax.vmap(search_row)(observation, legal, row_keys)
  weights = out.action_weights  # [R, J, A]
  fresh_policy = jnp.where(policy_mask[..., None], weights[:, :k1], batch.target_policy[picked])
  batch = batch.replace(target_policy=batch.target_policy.at[picked].set(fresh_policy))
  if td_steps == 0:
    return batch

  # V'_b - V_b, from b's mover's view to the start mover's, times discount^(b-j).
  value = out.root_value[:, k1:]
  boot_slot = slot[:, k1:]
  delta = value - data.search_value[boot_slot, lane]
  mover = data.player[boot_slot, lane]
  root = data.player[prepared.phys[i, lane[:, 0]], lane[:, 0]][:, None]
  if env.payoff == "zero_sum":
    delta = jnp.where(mover == root, delta, -delta)
  scale = jnp.power(discount, (boot - pos).astype(jnp.float32))
  fresh_value = batch.target_value[picked] + jnp.where(has_boot, scale * delta, 0.0)
  return batch.replace(target_value=batch.target_value.at[picked].set(fresh_value))


def _bootstrap_steps(
  prepared: replay_lib.Prepared, pos: chex.Array, lane: chex.Array, alive: chex.Array, n: int
):
  """For the steps at logical times `pos` `[R, J]` of lanes `lane` `[R, 1]`:
  the step whose search value their n-step value target bootstraps from
  (int32 `[R, J]`, logical) and whether there is one (bool `[R, J]`), by the
  rules of `replay._returns`."""
  cap = prepared.buffer.capacity
  data = prepared.buffer.data
  time = jnp.arange(cap)[:, None]
  decision = prepared.decision
  next_decision = jax.lax.cummin(jnp.where(decision, time, cap), axis=0, reverse=True)
  last_decision = jax.lax.cummax(jnp.where(decision, time, -1), axis=0)
  end = jnp.minimum(prepared.end[pos, lane], cap - 1)
  # The first decision step at or after pos + n, if the episode gets there.
  target = pos + n
  b = jnp.where(target < cap, next_decision[jnp.minimum(target, cap - 1), lane], cap)
  reached = b <= prepared.end[pos, lane]
  # Else, where the data stops before the rules end the game, the last
  # decision step before the stop (if not before pos).
  end_slot = prepared.phys[end, lane]
  terminated = data.done[end_slot, lane] & ~data.truncated[end_slot, lane]
  c = last_decision[end, lane]
  cut = ~terminated & (c >= pos)
  step = jnp.where(reached, b, c)
  return jnp.clip(step, 0, cap - 1), alive & (reached | cut)
