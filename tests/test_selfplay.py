"""Self-play that searches only at decision nodes gives the very games, and so
the very replay targets, of the old path that searches at every node.

Both paths draw chance outcomes and restarts from per-lane key streams, and
the search here is deterministic (no root noise, argmax identity,
deterministic chance children, greedy moves), so lane b plays the same
transitions in both, however the paths schedule them. The test compares the
lanes transition by transition and then the replay targets built from both
buffers, start by start.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz import config as config_lib
from anakin_mz.core import replay
from anakin_mz.core.networks import Network, NetworkConfig
from anakin_mz.core.search import SearchConfig
from anakin_mz.core.selfplay import init_actors, rollout

B, T, CHUNKS, K = 8, 12, 6, 3
FIELDS = (
  "observation",
  "player",
  "action",
  "rewards",
  "search_policy",
  "search_value",
  "chance_probs",
  "next_player",
  "done",
  "truncated",
)


def _play(env, network, params, search_at_chance):
  """CHUNKS rollouts; returns (per-lane lists of transitions as dicts of numpy
  arrays, the buffer holding them, summed stats)."""
  config = SearchConfig(
    num_simulations=3,
    dirichlet_fraction=0.0,
    identity_mode="argmax",
    chance_mode="prior_minus_visits",
  )
  roll = jax.jit(
    functools.partial(
      rollout,
      env=env,
      network=network,
      config=config,
      num_steps=T,
      temperature=0.0,
      search_at_chance=search_at_chance,
    )
  )
  add = jax.jit(functools.partial(replay.add, drop_invalid=True))
  actor = init_actors(env, jax.random.PRNGKey(1), B)
  cap = 4 * T * CHUNKS  # never wraps
  buf = replay.init_buffer(replay.example_transition(env), cap, B)
  lanes = [[] for _ in range(B)]
  totals = None
  search_slots = 0  # valid records in the slots of the search's move
  key = jax.random.PRNGKey(2)
  for _ in range(CHUNKS):
    key, k = jax.random.split(key)
    actor, records, stats = roll(params, actor, k)
    buf = add(buf, records)
    totals = stats if totals is None else jax.tree.map(jnp.add, totals, stats)
    rec = jax.device_get(records)
    slots = 1 if search_at_chance else env.chance_run + 1
    search_slots += int(rec.valid[slots - 1 :: slots].sum())
    for t in range(rec.valid.shape[0]):
      for b in range(B):
        if rec.valid[t, b]:
          lanes[b].append({f: np.asarray(getattr(rec, f)[t, b]) for f in FIELDS})
  return lanes, buf, jax.device_get(totals), jax.device_get(actor), search_slots


# Both bounds prove the same property; 3 compiles longer (slow-marked).
@pytest.mark.parametrize("chance_run", [pytest.param(3, marks=pytest.mark.slow), 1])
def test_decision_only_search_gives_the_targets_of_search_everywhere(chance_run):
  env = envs.make("nannon")
  # Nannon's bound is 3; 1 is shorter than a forfeit's two rolls, so the
  # fallback (a chance node played in the search slot) is exercised too.
  env.game.max_chance_run = chance_run
  assert env.chance_run == chance_run
  network = Network(env, NetworkConfig(kind="mlp", hidden=(16,), latent_dim=8))
  params = network.init(jax.random.PRNGKey(0))
  old, old_buf, old_stats, old_actor, _ = _play(env, network, params, True)
  new, new_buf, new_stats, new_actor, moves = _play(env, network, params, False)

  # The old path: one search per transition, T per lane per chunk.
  assert int(old_stats.searches) == int(old_stats.transitions) == B * T * CHUNKS
  assert all(len(lane) == T * CHUNKS for lane in old)
  # The new path: T transitions per lane per chunk over time (each lane's
  # quota and surplus), and a move from the search at each decision, except
  # where a chance run outlasts chance_run.
  total = int(new_stats.transitions)
  surplus = np.asarray(new_actor.surplus)
  for b in range(B):
    assert len(new[b]) == T * CHUNKS + surplus[b]
    assert 0 <= surplus[b] <= chance_run
  assert sum(len(lane) for lane in new) == total
  # add(drop_invalid=True) packs each lane: no padding inside a lane (it would
  # end the lane's data there and cut the targets).
  valid, count = np.asarray(new_buf.data.valid), np.asarray(new_buf.count)
  for b in range(B):
    assert valid[: count[b], b].all() and not valid[count[b] :, b].any()
  assert count.sum() == total
  assert int(new_stats.searches) < int(old_stats.searches) * 0.6
  long_runs = 0
  for lane in new:  # chance runs longer than chance_run, each takes a search's slot
    run = 0
    for s in lane:
      run = run + 1 if s["player"] < 0 else 0
      long_runs += run > chance_run
  assert moves == int(new_stats.decision_steps) + long_runs
  if chance_run == 1:
    assert long_runs > 0, "the fallback was not exercised"

  # Transition by transition, every lane plays the same game.
  compared = 0
  for b in range(B):
    n = min(len(old[b]), len(new[b]))
    assert n >= T * CHUNKS - T
    for t in range(n):
      for f in FIELDS:
        np.testing.assert_array_equal(old[b][t][f], new[b][t][f], err_msg=f"lane {b} step {t} {f}")
      compared += 1
  assert sum(s["done"] for lane in old for s in lane) > 4  # whole games

  # The replay targets, start by start, wherever both buffers hold the whole
  # episode (elsewhere the write heads legitimately cut them differently).
  # Jitted: op by op, the target building compiled some 400 tiny programs.
  prep = jax.jit(functools.partial(replay.prepare, K=K, num_players=2, payoff="zero_sum"))
  p_old, p_new = prep(old_buf), prep(new_buf)
  common = np.minimum(np.asarray(old_buf.count), np.asarray(new_buf.count))
  end_old, end_new = np.asarray(p_old.end), np.asarray(p_new.end)
  done_old = np.asarray(old_buf.data.done)  # no wrap: logical == physical
  i_list, lane_list = [], []
  for b in range(B):
    for t in range(common[b]):
      e = end_old[t, b]
      complete = e < common[b] and done_old[e, b] and end_new[t, b] == e
      if complete and p_old.start_ok[t, b]:
        assert p_new.start_ok[t, b]
        i_list.append(t)
        lane_list.append(b)
      if complete:
        np.testing.assert_array_equal(p_old.values[t, b], p_new.values[t, b])
  assert len(i_list) > 50
  starts = replay.Starts(
    i=jnp.asarray(i_list),
    lane=jnp.asarray(lane_list),
    row=jnp.arange(len(i_list)),
    key=jax.random.PRNGKey(3),
  )
  at = jax.jit(
    functools.partial(
      replay.targets_at,
      batch_size=len(i_list),
      K=K,
      num_players=2,
      num_actions=env.num_actions,
    )
  )
  b_old, b_new = at(p_old, starts=starts), at(p_new, starts=starts)
  for f in b_old.keys():
    np.testing.assert_array_equal(np.asarray(b_old[f]), np.asarray(b_new[f]), err_msg=f)


def test_search_at_chance_flag_must_be_a_bool():
  path = "nannon"  # a shipped config, by name
  assert config_lib.load(path, ["train.search_at_chance=true"]).train.search_at_chance
  with pytest.raises(ValueError, match="train.search_at_chance must be of type bool"):
    config_lib.load(path, ["train.search_at_chance=sometimes"])
