"""The sibling-value term (`loss.sibling_value_weight`): self-play records
every legal move's value one ply deep on the real game (`lookahead.siblings`),
the replay hands them to the loss, and the loss regresses the learned
model's one-step values of those moves on them; exact numbers on a tiny
model, the masks, and the errors."""

import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
import tiny
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.core import lookahead, replay
from anakin_mz import config as config_lib
from anakin_mz.core.selfplay import best_sibling
from anakin_mz.core.loss import LossConfig, ndmz_loss, sibling_value_loss
from anakin_mz.core.networks import Network, NetworkConfig


def _nannon():
  return envs.make("nannon", points=6, checkers=3, die_sides=6)


def _network(env):
  return Network(env, NetworkConfig(hidden=(8,), latent_dim=4))


def _states(env, n, key):
  """`n` states of random play, some at chance nodes, some at decisions."""
  policy = envs.random_policy
  states = []
  state = jax.vmap(env.init)(jax.random.split(key, 4))
  for i in range(n):
    key, k1, k2, k3 = jax.random.split(key, 4)
    states.append(state)
    move = jax.vmap(policy)(state, jax.random.split(k1, 4))
    chance = jax.vmap(envs.chance_outcome)(state, jax.random.split(k2, 4))
    action = jnp.where(state.current_player == envs.CHANCE, chance, move)
    nxt = jax.vmap(env.step)(state, action)
    state = jax.tree.map(
      lambda a, b: jnp.where(nxt.done.reshape((-1,) + (1,) * (a.ndim - 1)), a, b),
      jax.vmap(env.init)(jax.random.split(k3, 4)),
      nxt,
    )
  return jax.tree.map(lambda *xs: jnp.concatenate(xs), *states)


def test_siblings_are_the_value_players_move_values_at_the_legal_moves():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(1))
  policy = lookahead.expectimax_policy(env, lambda o: net.root(params, o).value, discount=1.0)
  state = _states(env, 6, jax.random.PRNGKey(2))
  action, q = jax.jit(lookahead.siblings, static_argnums=0)(policy, state)
  values = np.asarray(jax.jit(policy.action_values)(state))
  legal = np.asarray(state.legal_action_mask)
  player = np.asarray(state.current_player)
  action, q = np.asarray(action), np.asarray(q)
  assert action.shape == (24, env.max_legal_actions)
  assert (player == envs.CHANCE).any() and (player >= 0).any()
  for b in range(24):
    moves = np.flatnonzero(legal[b]) if player[b] >= 0 else np.array([], int)
    k = len(moves)
    np.testing.assert_array_equal(action[b, :k], moves)
    assert (action[b, k:] == -1).all() and (q[b, k:] == 0).all()
    np.testing.assert_allclose(q[b, :k], values[b, moves], rtol=1e-6)


def _sibling_batch(env, n=3):
  """A hand-built batch of `n` starts with sibling moves, the last slot of
  the first start and all of the last start's unused (-1)."""
  s = env.max_legal_actions
  obs = jax.random.normal(jax.random.PRNGKey(3), (n,) + env.observation_shape)
  action = np.full((n, s), -1, np.int32)
  action[0, : s - 1] = [0, 2][: s - 1]
  action[1, :] = np.arange(s)
  q = np.where(action >= 0, np.linspace(-0.9, 0.8, n * s).reshape(n, s), 0.0)
  k = 1
  a, c = env.num_actions, env.num_chance_outcomes
  return replay.Batch(
    observation=obs,
    actions=jnp.zeros((n, k), jnp.int32),
    target_value=jnp.zeros((n, k + 1)),
    target_reward=jnp.zeros((n, k)),
    target_policy=jnp.zeros((n, k + 1, a)),
    policy_mask=jnp.zeros((n, k + 1), bool),
    target_chance=jnp.zeros((n, k + 1, c)),
    chance_mask=jnp.zeros((n, k + 1), bool),
    target_identity=jnp.zeros((n, k), jnp.int32),
    sibling_action=jnp.asarray(action),
    sibling_q=jnp.asarray(q, jnp.float32),
  )


def _sibling_loss(params, net, batch, *, discount):
  """The term on h's latent of the batch's observations, as `ndmz_loss`
  hands it the unroll's."""
  root = net.represent(params, batch.observation)
  return sibling_value_loss(params, net, root, batch, discount=discount)


def test_sibling_loss_is_the_mean_squared_error_of_the_models_one_step_values():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(4))
  batch = _sibling_batch(env)
  discount = 0.9
  got = float(
    jax.jit(_sibling_loss, static_argnums=1, static_argnames="discount")(
      params, net, batch, discount=discount
    )
  )
  # The reference: the search's own inference, one move at a time.
  root = net.root(params, batch.observation)
  per_start = []
  for b in range(batch.sibling_q.shape[0]):
    errs = []
    for slot, a in enumerate(np.asarray(batch.sibling_action[b])):
      if a < 0:
        continue
      out = net.recurrent(params, None, jnp.array([a]), root.embedding[b : b + 1])
      q = float(out.reward[0]) + discount * float(out.value[0])
      errs.append((q - float(batch.sibling_q[b, slot])) ** 2)
    per_start.append(np.mean(errs) if errs else 0.0)
  np.testing.assert_allclose(got, np.mean(per_start), rtol=1e-5)
  assert per_start[-1] == 0.0 and got > 0


def test_sibling_loss_trains_g_and_f_and_is_weighted_into_the_total():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(5))
  batch = _sibling_batch(env)
  grads = jax.grad(lambda p: _sibling_loss(p, net, batch, discount=1.0))(params)
  norm = lambda tree: sum(float(jnp.sum(jnp.square(x))) for x in jax.tree.leaves(tree))
  assert norm(grads["g"]) > 0 and norm(grads["f"]) > 0 and norm(grads["h"]) > 0
  # Ignored slots do not matter: changing their targets changes nothing.
  moved = batch.replace(sibling_q=jnp.where(batch.sibling_action >= 0, batch.sibling_q, 5.0))
  assert float(_sibling_loss(params, net, moved, discount=1.0)) == pytest.approx(
    float(_sibling_loss(params, net, batch, discount=1.0))
  )
  off, off_terms = ndmz_loss(params, net, batch, LossConfig())
  on, on_terms = ndmz_loss(params, net, batch, LossConfig(sibling_value_weight=2.0), discount=1.0)
  assert "sibling_value" not in off_terms
  np.testing.assert_allclose(
    float(on) - float(off), 2.0 * float(on_terms["sibling_value"]), rtol=1e-5
  )


def test_a_batch_without_siblings_is_refused_by_name():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(6))
  batch = _sibling_batch(env).replace(sibling_action=None, sibling_q=None)
  with pytest.raises(ValueError, match="sibling_q"):
    ndmz_loss(params, net, batch, LossConfig(sibling_value_weight=1.0))


def test_the_learner_records_siblings_and_trains_on_them():
  cfg = tiny.tiny_config(
    "nannon", "train.checkpoint_every=0", "train.total_updates=4", "loss.sibling_value_weight=1.0"
  )
  learner = Learner(cfg)
  state = learner.init(jax.random.PRNGKey(0))
  state, metrics = learner.jit_step(state)
  data = jax.device_get(state.buffer.data)
  decision = data.valid & (data.player >= 0)
  chance = data.valid & (data.player == envs.CHANCE)
  assert decision.any() and chance.any()
  assert (data.sibling_action[chance] == -1).all() and (data.sibling_q[chance] == 0).all()
  assert (data.sibling_action[decision][:, 0] >= 0).all()  # every decision has a legal move
  # A decision's taken move is among its recorded siblings, valued (the
  # initial params give nonzero values).
  taken = data.action[decision]
  assert (data.sibling_action[decision] == taken[:, None]).any(-1).all()
  assert np.abs(data.sibling_q[decision]).max() > 0
  # The default self-play player is the search: sampled at temperature 1 from
  # a tiny untrained network's visits, its moves are not all the best sibling
  # (what train.selfplay_player=value plays, test_selfplay_player).
  best = best_sibling((data.sibling_action[decision], data.sibling_q[decision]), taken)
  assert (np.asarray(best) != taken).any()
  assert np.isfinite(float(jax.device_get(metrics.terms["sibling_value"])))
  # Off (weight 0): the buffer keeps no siblings.
  plain = Learner(
    tiny.tiny_config("nannon", "train.checkpoint_every=0", "loss.sibling_value_weight=0")
  ).init(jax.random.PRNGKey(0))
  assert plain.buffer.data.sibling_q is None


# A tiny learner's run: slow (the fast suite keeps the term's exact numbers).
@pytest.mark.slow
def test_the_batch_holds_the_siblings_of_every_unrolled_step():
  # The learner test's overrides: the same compiled programs.
  cfg = tiny.tiny_config(
    "nannon", "train.checkpoint_every=0", "train.total_updates=4", "loss.sibling_value_weight=1.0"
  )
  learner = Learner(cfg)
  state, _ = learner.jit_step(learner.init(jax.random.PRNGKey(0)))
  env, k, n = learner.env, cfg.train.unroll_steps, 16
  prepared = replay.prepare(state.buffer, K=k, num_players=env.num_players, payoff=env.payoff)
  starts = replay.sample_starts(prepared, jax.random.PRNGKey(1), n)
  batch = replay.targets_at(
    prepared, starts, batch_size=n, K=k, num_players=env.num_players, num_actions=env.num_actions
  )
  data, phys = jax.device_get((state.buffer.data, prepared.phys))
  i, lane = np.asarray(starts.i), np.asarray(starts.lane)
  assert np.asarray(prepared.start_ok)[i, lane].all()
  action, q = np.asarray(batch.sibling_action), np.asarray(batch.sibling_q)
  mask = np.asarray(batch.policy_mask)
  assert action.shape == q.shape == (n, k + 1, env.max_legal_actions)
  assert mask[:, 0].all() and mask[:, 1:].any() and (~mask[:, 1:]).any()
  for row in range(n):
    for step in range(k + 1):
      slot = phys[min(i[row] + step, phys.shape[0] - 1), lane[row]]
      if mask[row, step]:  # step t+k's own record (its mover's view)
        np.testing.assert_array_equal(action[row, step], data.sibling_action[slot, lane[row]])
        np.testing.assert_array_equal(q[row, step], data.sibling_q[slot, lane[row]])
        assert action[row, step, 0] >= 0
      else:
        assert (action[row, step] == -1).all() and (q[row, step] == 0).all()


def _unrolled_sibling_batch(env):
  """A hand-built batch of 3 starts, K = 2, with every step's siblings
  `[3, 3, S]` (S = 3): row 0 decides at k = 0 and, the opponent's move, at
  k = 2 (k = 1 a chance step, whose slots hold values the term must not
  read); row 1 at k = 0 and, its own again, at k = 1 (k = 2 past the end);
  row 2 at k = 0 only. Unused slots (-1) hold values too."""
  n, k, s = 3, 2, env.max_legal_actions
  a, c = env.num_actions, env.num_chance_outcomes
  chance, terminal = env.num_players, env.num_players + 1
  action = np.full((n, k + 1, s), -1, np.int32)
  action[0, 0, :2] = [1, 4]
  action[0, 1, :] = [0, 1, 2]  # a chance step: never read
  action[0, 2, :] = [0, 3, 5]
  action[1, 0, :1] = [2]
  action[1, 1, :2] = [0, 6]
  action[1, 2, :] = [3, 4, 5]  # past the end: never read
  action[2, 0, :] = [0, 2, 4]
  action[2, 1:, :] = 1  # chance and past the end: never read
  q = np.linspace(-0.9, 0.8, n * (k + 1) * s).reshape(n, k + 1, s)
  q = np.where(action >= 0, q, 5.0)  # the unused slots' values are never read
  mask = np.array([[1, 0, 1], [1, 1, 0], [1, 0, 0]], bool)
  identity = np.array([[chance, 1], [0, terminal], [chance, terminal]], np.int32)
  return replay.Batch(
    observation=jax.random.normal(jax.random.PRNGKey(7), (n,) + env.observation_shape),
    actions=jnp.asarray([[3, a + 2], [2, 5], [0, a + 1]], jnp.int32),
    target_value=jnp.zeros((n, k + 1)),
    target_reward=jnp.zeros((n, k)),
    target_policy=jnp.zeros((n, k + 1, a)),
    policy_mask=jnp.asarray(mask),
    target_chance=jnp.zeros((n, k + 1, c)),
    chance_mask=jnp.asarray(~mask),
    target_identity=jnp.asarray(identity),
    sibling_action=jnp.asarray(action),
    sibling_q=jnp.asarray(q, jnp.float32),
  )


def _all_steps_loss(params, net, batch, *, discount, steps="all"):
  """The term on the unroll's latents, as `ndmz_loss` hands them."""
  out = net.unroll(params, batch.observation, batch.actions)
  return sibling_value_loss(
    params, net, out.root_latent, batch, discount=discount, latents=out.latents, steps=steps
  )


def _reference_all_steps(params, net, batch, *, discount):
  """The "all" rule, one step and one move at a time with the search's own
  inference (`Network.root`, `Network.recurrent` along the batch's
  actions): per step the mean over its legal moves, per sample the mean
  over its decision steps, then the batch mean. The sign: -1 at a step
  whose relative player is not 0, in a zero-sum game."""
  action, q = np.asarray(batch.sibling_action), np.asarray(batch.sibling_q)
  mask, identity = np.asarray(batch.policy_mask), np.asarray(batch.target_identity)
  n, k1, _ = q.shape
  per_sample = []
  for b in range(n):
    latent = net.root(params, batch.observation[b : b + 1]).embedding
    steps = []
    for k in range(k1):
      if k > 0:
        latent = net.recurrent(params, None, batch.actions[b, k - 1 : k], latent).embedding
      if not mask[b, k]:
        continue
      rel = 0 if k == 0 else identity[b, k - 1]
      sign = -1.0 if net.payoff == "zero_sum" and rel != 0 else 1.0
      errs = []
      for slot in np.flatnonzero(action[b, k] >= 0):
        out = net.recurrent(params, None, jnp.array([action[b, k, slot]]), latent)
        value = float(out.reward[0]) + discount * float(out.value[0])
        errs.append((value - sign * float(q[b, k, slot])) ** 2)
      steps.append(np.mean(errs) if errs else 0.0)
    per_sample.append(np.mean(steps) if steps else 0.0)
  return float(np.mean(per_sample))


_all_loss = jax.jit(_all_steps_loss, static_argnums=1, static_argnames=("discount", "steps"))


def test_all_steps_is_the_per_step_reference_with_the_opponents_sign():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(8))
  batch = _unrolled_sibling_batch(env)
  got = float(_all_loss(params, net, batch, discount=0.9))
  want = _reference_all_steps(params, net, batch, discount=0.9)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  # A game without opponents (collaborative: the movers share one view)
  # reads every step's value as recorded.
  shared = copy.copy(net)
  shared.payoff = "collaborative"
  got_shared = float(_all_loss(params, shared, batch, discount=0.9))
  np.testing.assert_allclose(
    got_shared, _reference_all_steps(params, shared, batch, discount=0.9), rtol=1e-5
  )
  assert abs(got_shared - got) > 1e-3  # the opponent's step (row 0, k = 2) flips
  # The flip itself: the opponent's targets (row 0, k = 2) set to minus the
  # model's own values there cost nothing in the zero-sum game, so row 0
  # costs half its k = 0 step's error (the mean over its two steps).
  latent = net.unroll(params, batch.observation, batch.actions).latents[0, 1]
  own = net.recurrent(params, None, batch.sibling_action[0, 2], jnp.stack([latent] * 3))
  exact = batch.replace(sibling_q=batch.sibling_q.at[0, 2].set(-(own.reward + 0.9 * own.value)))
  row0 = exact.replace(**_rows(exact, 0))
  k0_only = row0.replace(policy_mask=row0.policy_mask.at[0, 2].set(False))
  np.testing.assert_allclose(
    float(_all_loss(params, net, row0, discount=0.9)),
    float(_all_loss(params, net, k0_only, discount=0.9)) / 2,
    rtol=1e-4,
  )
  assert float(_all_loss(params, shared, row0, discount=0.9)) > float(
    _all_loss(params, shared, k0_only, discount=0.9)
  )


def _rows(batch, row):
  """Row `row` of `batch`, as a batch of one."""
  return {
    f: getattr(batch, f)[row : row + 1] for f in batch.keys() if getattr(batch, f) is not None
  }


def test_all_steps_reads_no_masked_step_nor_unused_slot():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(9))
  batch = _unrolled_sibling_batch(env)
  base = float(_all_loss(params, net, batch, discount=1.0))
  read = batch.policy_mask[..., None] & (batch.sibling_action >= 0)
  moved = batch.replace(
    sibling_q=jnp.where(read, batch.sibling_q, -7.0),
    sibling_action=jnp.where(batch.policy_mask[..., None], batch.sibling_action, 2),
  )
  assert float(_all_loss(params, net, moved, discount=1.0)) == pytest.approx(base, rel=1e-6)
  # A decision step's moves are read: changing one changes the term.
  changed = batch.replace(sibling_q=batch.sibling_q.at[1, 1, 1].add(1.0))
  assert abs(float(_all_loss(params, net, changed, discount=1.0)) - base) > 1e-4


def test_start_steps_are_unchanged_by_every_steps_siblings():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(10))
  every = _unrolled_sibling_batch(env)
  start = every.replace(sibling_action=every.sibling_action[:, 0], sibling_q=every.sibling_q[:, 0])
  cfg = LossConfig(sibling_value_weight=2.0)
  grad = jax.jit(jax.value_and_grad(lambda p, b: ndmz_loss(p, net, b, cfg, discount=0.9)[0]))
  (v_every, g_every), (v_start, g_start) = grad(params, every), grad(params, start)
  assert float(v_every) == float(v_start)  # bit for bit
  for a, b in zip(jax.tree.leaves(g_every), jax.tree.leaves(g_start), strict=True):
    np.testing.assert_array_equal(a, b)
  # "all" differs (it reads later steps), and with K = 0 it is "start".
  assert float(_all_loss(params, net, every, discount=0.9)) != pytest.approx(
    float(_all_loss(params, net, every, discount=0.9, steps="start"))
  )
  k0 = dict(
    actions=every.actions[:, :0],
    target_value=every.target_value[:, :1],
    target_reward=every.target_reward[:, :0],
    target_policy=every.target_policy[:, :1],
    policy_mask=every.policy_mask[:, :1],
    target_chance=every.target_chance[:, :1],
    chance_mask=every.chance_mask[:, :1],
    target_identity=every.target_identity[:, :0],
    sibling_action=every.sibling_action[:, :1],
    sibling_q=every.sibling_q[:, :1],
  )
  one = every.replace(**k0)
  np.testing.assert_allclose(
    float(_all_steps_loss(params, net, one, discount=0.9)),
    float(_all_steps_loss(params, net, one, discount=0.9, steps="start")),
    rtol=1e-6,
  )


def test_all_steps_is_weighted_into_the_total_and_trains_g_through_the_unroll():
  env = _nannon()
  net = _network(env)
  params = net.init(jax.random.PRNGKey(11))
  batch = _unrolled_sibling_batch(env)
  off, _ = ndmz_loss(params, net, batch, LossConfig())
  on, terms = ndmz_loss(
    params, net, batch, LossConfig(sibling_value_weight=3.0, sibling_steps="all"), discount=0.9
  )
  np.testing.assert_allclose(float(on) - float(off), 3.0 * float(terms["sibling_value"]), rtol=1e-5)
  np.testing.assert_allclose(
    float(terms["sibling_value"]), _reference_all_steps(params, net, batch, discount=0.9), rtol=1e-5
  )
  # Only the later steps move with the unroll's actions (g's latents there).
  other = batch.replace(actions=batch.actions.at[0, 0].set(5).at[1, 0].set(0))
  assert float(_all_loss(params, net, other, discount=0.9)) != pytest.approx(
    float(_all_loss(params, net, batch, discount=0.9))
  )
  assert float(_all_loss(params, net, other, discount=0.9, steps="start")) == pytest.approx(
    float(_all_loss(params, net, batch, discount=0.9, steps="start"))
  )
  with pytest.raises(ValueError, match=r"K\+1"):  # "all" needs every step's siblings
    start_only = batch.replace(
      sibling_action=batch.sibling_action[:, 0], sibling_q=batch.sibling_q[:, 0]
    )
    _all_steps_loss(params, net, start_only, discount=0.9)


def test_sibling_steps_is_validated():
  with pytest.raises(ValueError, match="start, all"):
    LossConfig(sibling_value_weight=1.0, sibling_steps="every")
  with pytest.raises(ValueError, match="sibling_value_weight"):
    LossConfig(sibling_steps="all")
  assert LossConfig().sibling_steps == "start"
  with pytest.raises(ValueError, match="start, all"):
    tiny.tiny_config("nannon", "loss.sibling_value_weight=1.0", "loss.sibling_steps=some")
  cfg = tiny.tiny_config("nannon", "loss.sibling_value_weight=1.0", "loss.sibling_steps=all")
  assert cfg.loss.sibling_steps == "all"
  assert config_lib.from_dict(cfg.to_dict()).loss.sibling_steps == "all"


# A tiny learner's run: slow (the fast suite keeps the term's exact numbers).
@pytest.mark.slow
def test_a_learner_trains_with_every_steps_siblings():
  cfg = tiny.tiny_config(
    "nannon",
    "train.checkpoint_every=0",
    "train.total_updates=4",
    "loss.sibling_value_weight=1.0",
    "loss.sibling_steps=all",
  )
  learner = Learner(cfg)
  state = learner.init(jax.random.PRNGKey(0))
  before = jax.tree.map(jnp.copy, state.params)  # jit_step deletes the state it steps
  for _ in range(2):
    state, metrics = learner.jit_step(state)
  value = float(jax.device_get(metrics.terms["sibling_value"]))
  assert np.isfinite(value) and value > 0
  moved = sum(
    float(jnp.sum(jnp.abs(a - b)))
    for a, b in zip(jax.tree.leaves(state.params["g"]), jax.tree.leaves(before["g"]))
  )
  assert moved > 0
  assert int(jax.device_get(state.update_step)) > 0


def test_a_game_the_value_player_cannot_look_ahead_on_is_refused():
  cfg = tiny.tiny_config("minatar-breakout", "loss.sibling_value_weight=1.0")
  with pytest.raises(ValueError, match="sibling_value_weight.*minatar"):
    Learner(cfg)


def test_sibling_depth_sets_the_targets_expectimax_depth():
  # The learner's SiblingFn at loss.sibling_depth=2 is the value head's
  # two-move expectimax on the real game (lookahead.siblings on it), not the
  # one-ply values of the default.
  env = _nannon()
  state = _states(env, 6, jax.random.PRNGKey(2))
  base = ("train.checkpoint_every=0", "loss.sibling_value_weight=1.0")
  deep = Learner(tiny.tiny_config("nannon", *base, "loss.sibling_depth=2"))
  flat = Learner(tiny.tiny_config("nannon", *base))
  params = deep.network.init(jax.random.PRNGKey(1))
  value = deep.agent.value(deep.network, params)
  got = jax.jit(deep._sibling_fn())(params, state)
  one = jax.jit(flat._sibling_fn())(params, state)
  for depth, have in ((2, got), (1, one)):
    policy = lookahead.expectimax_policy(env, value, discount=deep.config.discount, depth=depth)
    want = jax.jit(lookahead.siblings, static_argnums=0)(policy, state)
    np.testing.assert_array_equal(np.asarray(have[0]), np.asarray(want[0]))
    np.testing.assert_allclose(np.asarray(have[1]), np.asarray(want[1]), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(one[0]))  # the same moves
  assert np.abs(np.asarray(got[1]) - np.asarray(one[1])).max() > 1e-4  # other values


def test_sibling_depth_is_validated():
  with pytest.raises(ValueError, match="sibling_depth must be an int in 1..3, got 4"):
    LossConfig(sibling_value_weight=1.0, sibling_depth=4)
  with pytest.raises(ValueError, match="sibling_depth=2 .* sibling_value_weight 0"):
    LossConfig(sibling_depth=2)
  with pytest.raises(ValueError, match="sibling_depth must be of type int"):
    tiny.tiny_config("nannon", "loss.sibling_value_weight=1.0", "loss.sibling_depth=1.5")
  assert LossConfig().sibling_depth == 1


def test_a_lane_stride_values_every_strideth_lane_alone():
  # loss.sibling_lane_stride=3: the learner's SiblingFn gives lanes 0, 3,
  # 6, ... the rows of stride 1 and every other lane the rows of a lane at
  # no decision node (-1 moves, value 0), so the loss skips them.
  env = _nannon()
  state = _states(env, 6, jax.random.PRNGKey(2))  # 24 lanes
  base = ("train.checkpoint_every=0", "loss.sibling_value_weight=1.0")
  every = Learner(tiny.tiny_config("nannon", *base))
  thin = Learner(tiny.tiny_config("nannon", *base, "loss.sibling_lane_stride=3"))
  params = every.network.init(jax.random.PRNGKey(1))
  want = [np.asarray(x) for x in jax.jit(every._sibling_fn())(params, state)]
  got = [np.asarray(x) for x in jax.jit(thin._sibling_fn())(params, state)]
  kept = np.arange(24) % 3 == 0
  assert (want[0][kept] >= 0).any() and (want[0][~kept] >= 0).any()
  np.testing.assert_array_equal(got[0][kept], want[0][kept])
  np.testing.assert_allclose(got[1][kept], want[1][kept], rtol=1e-6)
  assert (got[0][~kept] == -1).all() and (got[1][~kept] == 0).all()


def test_sibling_lane_stride_is_validated():
  with pytest.raises(ValueError, match="sibling_lane_stride must be an int >= 1, got 0"):
    LossConfig(sibling_value_weight=1.0, sibling_lane_stride=0)
  with pytest.raises(ValueError, match="sibling_lane_stride=4 .* sibling_value_weight 0"):
    LossConfig(sibling_lane_stride=4)
  with pytest.raises(ValueError, match="sibling_lane_stride must be of type int"):
    tiny.tiny_config("nannon", "loss.sibling_value_weight=1.0", "loss.sibling_lane_stride=2.5")
  assert LossConfig().sibling_lane_stride == 1
