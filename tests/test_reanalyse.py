"""Reanalyse: the reanalysed rows of a batch carry the targets of a search
with the current parameters, the others the replay's.

The reference is built another way: search again at *every* decision step of
the buffer with the new parameters, write the results where self-play wrote
its own (`search_policy`, `search_value`), and derive the targets of that
buffer with `replay.prepare` and `replay.targets_at`. The search is
deterministic (no root noise, argmax identity, deterministic chance
children; Gumbel scale 0), so a root's result does not depend on the batch it
is searched in. Nannon (two players, chance nodes) with a tiny MLP; the
buffer wraps, so some starts read episodes cut by the write head.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from anakin_mz import config as config_lib
from anakin_mz.core import reanalyse, replay
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.core.networks import Network
from anakin_mz.core.search import ndmz_search
from anakin_mz.core.selfplay import init_actors, rollout

NANNON = "nannon"  # a shipped config, by name
B, T, CHUNKS, CAP, K, N = 4, 12, 4, 32, 3, 16
DETERMINISTIC = [
  "search.dirichlet_fraction=0",
  "search.identity_mode=argmax",
  "search.chance_mode=prior_minus_visits",
  "search.gumbel_scale=0",
]


def _config(root="puct", td_steps=0, fraction=1.0, extra=DETERMINISTIC):
  return config_lib.load(
    NANNON,
    [
      "network.hidden=[16]",
      "network.latent_dim=8",
      "search.num_simulations=4",
      f"search.root={root}",
      "search.max_num_considered_actions=4",
      f"train.num_envs={B}",
      f"train.rollout_length={T}",
      f"train.replay_capacity={CAP}",
      "train.min_replay=0",
      f"train.batch_size={N}",
      f"train.unroll_steps={K}",
      f"train.td_steps={td_steps}",
      f"train.reanalyse_fraction={fraction}",
      "discount=0.9",
      *extra,
    ],
  )


# Jitted once per module (not per root's buffer): op by op, adding a chunk
# compiled dozens of tiny programs.
_add_jit = jax.jit(functools.partial(replay.add, drop_invalid=True))


@functools.lru_cache(maxsize=None)
def _buffer(root):
  """(env, network, current params, a buffer filled by self-play with other,
  older params); the rollout is compiled once per root."""
  cfg = _config(root)
  env = cfg.make_env()
  net = Network(env, cfg.network)
  old, new = net.init(jax.random.PRNGKey(0)), net.init(jax.random.PRNGKey(1))
  roll = jax.jit(
    functools.partial(
      rollout, env=env, network=net, config=cfg.search, num_steps=T, temperature=1.0
    )
  )
  actor = init_actors(env, jax.random.PRNGKey(2), B)
  buf = replay.init_buffer(replay.example_transition(env, legal_mask=True), CAP, B)
  key = jax.random.PRNGKey(3)
  for _ in range(CHUNKS):
    key, k = jax.random.split(key)
    actor, records, _ = roll(old, actor, k)
    buf = _add_jit(buf, records)
  assert int(np.min(buf.added)) > CAP  # the rings wrapped
  return env, net, new, buf


def _settings(cfg):
  """`reanalyse.refresh`'s settings of `cfg`, as the replay learner hands them."""
  return dict(
    search=cfg.search,
    num_rows=cfg.train.reanalyse_rows,
    td_steps=cfg.train.td_steps,
    discount=cfg.discount,
  )


def _setup(root, td_steps):
  """(config, env, network, current params, the prepared buffer)."""
  cfg = _config(root, td_steps)
  env, net, params, buf = _buffer(root)
  return cfg, env, net, params, _prepare(cfg, env, buf)


# The buffer's preparation and the batch are jitted (once per module, shared
# by the tests): op by op they compiled some hundreds of tiny programs each.
_prepare_jit = jax.jit(
  replay.prepare, static_argnames=("K", "num_players", "payoff", "td_steps", "discount")
)


def _prepare(cfg, env, buf):
  return _prepare_jit(
    buf,
    K=K,
    num_players=env.num_players,
    payoff=env.payoff,
    td_steps=cfg.train.td_steps,
    discount=cfg.discount,
  )


@functools.partial(jax.jit, static_argnames=("num_players", "num_actions"))
def _batch(prepared, key, *, num_players, num_actions):
  starts = replay.sample_starts(prepared, key, N)
  batch = replay.targets_at(
    prepared, starts, batch_size=N, K=K, num_players=num_players, num_actions=num_actions
  )
  return batch, starts


def _sample(prepared, key, env):
  """(the batch, its starts)."""
  return _batch(prepared, key, num_players=env.num_players, num_actions=env.num_actions)


def _refresh(cfg, env, net, params, prepared, key):
  batch, starts = _sample(prepared, key, env)
  fn = jax.jit(functools.partial(reanalyse.refresh, network=net, env=env, **_settings(cfg)))
  return batch, fn(params, prepared, batch, starts, key)


def _reference(cfg, env, net, params, prepared, key):
  """The batch of the same starts from a buffer searched again everywhere."""
  return jax.jit(functools.partial(_searched_again, env=env, net=net, cfg=cfg))(
    params, prepared, key
  )


def _searched_again(params, prepared, key, *, env, net, cfg):
  data = prepared.buffer.data
  decision = data.valid & (data.player >= 0)
  legal = jnp.where(decision[..., None], data.legal_action_mask, True)
  flat = lambda x: x.reshape((-1,) + x.shape[2:])
  out = ndmz_search(
    params,
    jax.random.PRNGKey(99),  # unused by a deterministic search
    net.root(params, flat(data.observation)),
    net.recurrent,
    flat(legal),
    num_players=env.num_players,
    payoff=env.payoff,
    config=cfg.search,
  )
  policy = out.action_weights.reshape(data.search_policy.shape)
  value = out.root_value.reshape(data.search_value.shape)
  data = data.replace(
    search_policy=jnp.where(decision[..., None], policy, data.search_policy),
    search_value=jnp.where(decision, value, data.search_value),
  )
  fresh = _prepare(cfg, env, prepared.buffer.replace(data=data))
  return replay.targets_at(
    fresh,
    replay.sample_starts(prepared, key, N),
    batch_size=N,
    K=K,
    num_players=env.num_players,
    num_actions=env.num_actions,
  )


def _close(a, b, **kw):
  np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6, **kw)


@pytest.mark.parametrize("root", ["puct", pytest.param("gumbel", marks=pytest.mark.slow)])
# td_steps=0 (outcome targets) takes the same path as 3 with no bootstrap: -m slow.
@pytest.mark.parametrize("td_steps", [pytest.param(0, marks=pytest.mark.slow), 3])
def test_fraction_one_gives_every_sample_the_current_search_targets(root, td_steps):
  cfg, env, net, params, prepared = _setup(root, td_steps)
  key = jax.random.PRNGKey(4)
  batch, got = _refresh(cfg, env, net, params, prepared, key)
  want = _reference(cfg, env, net, params, prepared, key)
  _close(got.target_policy, want.target_policy)
  # The stale targets differ: the test would see a refresh that did nothing.
  assert np.abs(np.asarray(batch.target_policy - want.target_policy)).max() > 0.1
  if td_steps:
    # n-step targets bootstrap from the fresh root values (discount 0.9).
    _close(got.target_value, want.target_value)
    assert np.abs(np.asarray(batch.target_value - want.target_value)).max() > 1e-3
  else:
    # Monte-Carlo targets are the outcomes: unchanged.
    np.testing.assert_array_equal(np.asarray(got.target_value), np.asarray(batch.target_value))
  for field in batch.keys():
    if field not in ("target_policy", "target_value"):
      np.testing.assert_array_equal(np.asarray(got[field]), np.asarray(batch[field]), field)


def test_only_the_chosen_fraction_of_rows_is_reanalysed():
  _, env, net, params, prepared = _setup("puct", 3)
  cfg = _config(td_steps=3, fraction=0.25)
  assert cfg.train.reanalyse_rows == 4
  # Spread over the batch of 16 (so over the lanes, and so over devices).
  rows = np.array([0, 4, 8, 12])
  assert reanalyse.reanalysed_rows(N, 4).tolist() == rows.tolist()
  assert reanalyse.reanalysed_rows(N, 4, num_shards=2).tolist() == [0, 4]
  with pytest.raises(ValueError, match="4 reanalysed samples .* do not split over 3 devices"):
    reanalyse.reanalysed_rows(N, 4, num_shards=3)
  others = np.array([r for r in range(N) if r not in rows])
  key = jax.random.PRNGKey(5)
  batch, got = _refresh(cfg, env, net, params, prepared, key)
  want = _reference(cfg, env, net, params, prepared, key)
  for field in ("target_policy", "target_value"):
    _close(got[field][rows], want[field][rows], err_msg=field)
    np.testing.assert_array_equal(np.asarray(got[field][others]), np.asarray(batch[field][others]))
    assert not np.allclose(np.asarray(batch[field][rows]), np.asarray(want[field][rows]))


def test_fraction_zero_keeps_the_replay_targets_and_no_legal_masks():
  _, env, net, params, prepared = _setup("puct", 0)
  cfg = _config(fraction=0.0)
  key = jax.random.PRNGKey(6)
  batch, starts = _sample(prepared, key, env)
  refreshed = reanalyse.refresh(
    params, prepared, batch, starts, key, network=net, env=env, **_settings(cfg)
  )
  assert refreshed is batch
  # The step's buffer keeps the legal moves only when reanalyse needs them.
  assert Learner(cfg).init(key).buffer.data.legal_action_mask is None
  mask = Learner(_config(fraction=0.5)).init(key).buffer.data.legal_action_mask
  assert mask.shape == (CAP, B, env.num_actions)


def test_same_key_same_targets_other_key_other_targets():
  _, env, net, params, prepared = _setup("puct", 0)
  cfg = _config(extra=[])  # root noise, sampled identities and chance children
  key = jax.random.PRNGKey(7)
  _, a = _refresh(cfg, env, net, params, prepared, key)
  _, b = _refresh(cfg, env, net, params, prepared, key)
  np.testing.assert_array_equal(np.asarray(a.target_policy), np.asarray(b.target_policy))
  batch, starts = _sample(prepared, key, env)
  other = jax.jit(functools.partial(reanalyse.refresh, network=net, env=env, **_settings(cfg)))(
    params, prepared, batch, starts, jax.random.PRNGKey(8)
  )
  assert not np.array_equal(np.asarray(a.target_policy), np.asarray(other.target_policy))


def test_a_buffer_without_legal_masks_is_refused():
  cfg, env, net, params, prepared = _setup("puct", 0)
  data = prepared.buffer.data.replace(legal_action_mask=None)
  bare = prepared.replace(buffer=prepared.buffer.replace(data=data))
  key = jax.random.PRNGKey(9)
  batch, starts = _sample(bare, key, env)
  with pytest.raises(ValueError, match="legal_mask=True"):
    reanalyse.refresh(params, bare, batch, starts, key, network=net, env=env, **_settings(cfg))


@pytest.mark.slow  # about 2 min of compilation; the exact tests above run in CI
def test_the_anakin_step_trains_with_reanalyse():
  cfg = _config(fraction=0.5, extra=[])
  learner = Learner(cfg)
  state = learner.init(jax.random.PRNGKey(10))
  for _ in range(2):
    state, metrics = learner.jit_step(state)
  assert int(metrics["updates_applied"]) == learner.updates_per_chunk
  assert np.isfinite(float(metrics.terms["loss"]))
  assert state.buffer.data.legal_action_mask.dtype == jnp.bool_
