"""Tests for anakin_mz.core.replay on hand-built lanes with hand-computed targets:
starts at decision steps only, absorbing targets past the end, MC and n-step
values, bootstrapping at truncation and at the write head, points of view
(zero-sum flips, collaborative does not), ring wrap-around."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz.core import replay
from anakin_mz.core.replay import sampling as sample_lib
from envs import CHANCE, TERMINAL

A, C = 3, 2  # player actions, chance outcomes
N = 48  # samples per call


def _step(player, action=0, r=0.0, sv=0.0, nxt=0, done=False, trunc=False, valid=True):
  return dict(
    player=player, action=action, r=r, sv=sv, nxt=nxt, done=done, trunc=trunc, valid=valid
  )


def _chunk(lanes, num_players, first_id=0):
  """Transition [T, B] from per-lane lists of steps. observation = [id] with
  id = 100 * lane + time, to find the start of a sample again."""
  t_len = len(lanes[0])

  def field(fn, dtype):
    return jnp.asarray(
      np.array([[fn(b, t, lanes[b][t]) for b in range(len(lanes))] for t in range(t_len)], dtype)
    )

  def rewards(b, t, s):
    r = s["r"]
    return list(r) if isinstance(r, (list, tuple)) else [r] * num_players

  return replay.Transition(
    observation=field(lambda b, t, s: [100 * b + t + first_id], np.float32),
    player=field(lambda b, t, s: s["player"], np.int32),
    action=field(lambda b, t, s: s["action"], np.int32),
    rewards=field(rewards, np.float32),
    search_policy=field(
      lambda b, t, s: _policy(t + first_id) if s["player"] >= 0 else [0.0] * A, np.float32
    ),
    search_value=field(lambda b, t, s: s["sv"], np.float32),
    chance_probs=field(
      lambda b, t, s: _probs(t + first_id) if s["player"] == CHANCE else [0.0] * C, np.float32
    ),
    next_player=field(lambda b, t, s: s["nxt"], np.int32),
    done=field(lambda b, t, s: s["done"], bool),
    truncated=field(lambda b, t, s: s["trunc"], bool),
    valid=field(lambda b, t, s: s["valid"], bool),
  )


def _policy(t):
  return list(np.roll([0.6, 0.3, 0.1], t))


def _probs(t):
  return list(np.roll([0.75, 0.25], t))


# Compiled once per shape: eager dispatch of these many small ops costs more.
_add = jax.jit(replay.add)
_value_targets = jax.jit(
  replay.value_targets, static_argnames=("num_players", "payoff", "td_steps", "discount")
)
_start_mask = jax.jit(replay.start_mask, static_argnums=1)
_jit_sample = jax.jit(
  replay.sample,
  static_argnums=(2,),
  static_argnames=("K", "num_players", "num_actions", "payoff", "td_steps", "discount"),
)


def _buffer(lanes, num_players, capacity):
  example = jax.tree.map(lambda x: x[0, 0], _chunk(lanes, num_players))
  buf = replay.init_buffer(example, capacity, len(lanes))
  return _add(buf, _chunk(lanes, num_players))


def _sample(buf, k, num_players, payoff, td_steps=0, discount=1.0, seed=0):
  return jax.device_get(
    _jit_sample(
      buf,
      jax.random.PRNGKey(seed),
      N,
      K=k,
      num_players=num_players,
      num_actions=A,
      payoff=payoff,
      td_steps=td_steps,
      discount=discount,
    )
  )


def _check(batch, expected, k):
  """Every sample matches the expected targets of its start (by id)."""
  starts = batch.observation[:, 0].astype(int)
  assert set(starts) <= set(expected), f"bad starts {set(starts) - set(expected)}"
  for n, s in enumerate(starts):
    e = expected[s]
    alive = np.array(e["policy_mask"]) | np.array(e["chance_mask"])
    np.testing.assert_allclose(
      batch.target_value[n], e["value"], atol=1e-6, err_msg=f"value from {s}"
    )
    np.testing.assert_allclose(
      batch.target_reward[n], e["reward"], atol=1e-6, err_msg=f"reward from {s}"
    )
    np.testing.assert_array_equal(
      batch.target_identity[n], e["identity"], err_msg=f"identity from {s}"
    )
    np.testing.assert_array_equal(batch.policy_mask[n], e["policy_mask"])
    np.testing.assert_array_equal(batch.chance_mask[n], e["chance_mask"])
    known = np.array(e["actions"]) >= 0
    np.testing.assert_array_equal(batch.actions[n][known], np.array(e["actions"])[known])
    assert np.all((batch.actions[n] >= 0) & (batch.actions[n] < A + C))
    for j in range(k + 1):
      t = s % 100 + j
      want_p = _policy(t) if e["policy_mask"][j] else [0.0] * A
      want_c = _probs(t) if e["chance_mask"][j] else [0.0] * C
      np.testing.assert_allclose(batch.target_policy[n, j], want_p, atol=1e-6)
      np.testing.assert_allclose(batch.target_chance[n, j], want_c, atol=1e-6)
    # Successors: the observation of step t+j (its id s + j) where t+j is a
    # decision step of the episode, zeros elsewhere.
    for j in range(1, k + 1):
      want_o = [s + j] if e["policy_mask"][j] else [0.0]
      np.testing.assert_array_equal(batch.successor_observation[n, j - 1], want_o)
    del alive


# Single player, Catch-like: chance, then moves. Episode 1 ends at t=2; the
# second episode is still running at the write head (t=6), slot 7 unwritten.
SINGLE = [
  _step(CHANCE, action=A + 1, nxt=0),  # 0
  _step(0, action=2, r=0.0, sv=0.5, nxt=0),  # 1
  _step(0, action=0, r=1.0, sv=0.8, nxt=TERMINAL, done=True),  # 2
  _step(CHANCE, action=A + 0, nxt=0),  # 3
  _step(0, action=1, r=0.5, sv=0.3, nxt=0),  # 4
  _step(0, action=1, r=0.25, sv=0.6, nxt=0),  # 5
  _step(0, action=1, r=0.0, sv=0.9, nxt=0),  # 6 (head)
]
T_ID = 2  # terminal identity for P = 1


def test_single_player_monte_carlo_targets():
  buf = _buffer([SINGLE], 1, capacity=8)
  np.testing.assert_array_equal(np.asarray(_start_mask(buf, 2))[:, 0], [0, 1, 1, 0, 1, 0, 0, 0])
  expected = {
    1: dict(
      value=[1, 1, 0],
      reward=[0, 1],
      identity=[0, T_ID],
      actions=[2, 0],
      policy_mask=[1, 1, 0],
      chance_mask=[0, 0, 0],
    ),
    2: dict(
      value=[1, 0, 0],
      reward=[1, 0],
      identity=[T_ID, T_ID],
      actions=[0, -1],
      policy_mask=[1, 0, 0],
      chance_mask=[0, 0, 0],
    ),
    # The head: the search value 0.9 at t=6 stands in for the rest.
    4: dict(
      value=[1.65, 1.15, 0.9],
      reward=[0.5, 0.25],
      identity=[0, 0],
      actions=[1, 1],
      policy_mask=[1, 1, 1],
      chance_mask=[0, 0, 0],
    ),
  }
  batch = _sample(buf, 2, 1, "single")
  _check(batch, expected, 2)
  assert set(batch.observation[:, 0].astype(int)) == {1, 2, 4}


def test_single_player_discount_and_td_steps():
  buf = _buffer([SINGLE], 1, capacity=8)
  g = np.asarray(_value_targets(buf, num_players=1, payoff="single", discount=0.5))[:, 0, 0]
  np.testing.assert_allclose(g[:7], [0.25, 0.5, 1, 0.85 / 2, 0.85, 0.7, 0.9], atol=1e-6)
  g = np.asarray(_value_targets(buf, num_players=1, payoff="single", td_steps=1))[:, 0, 0]
  # t: r_t + value of the first decision step >= t+1 in the same episode.
  np.testing.assert_allclose(g, [0.5, 0.8, 1, 0.3, 1.1, 1.15, 0.9, 0], atol=1e-6)
  g = np.asarray(_value_targets(buf, num_players=1, payoff="single", td_steps=2, discount=0.5))[
    :, 0, 0
  ]
  np.testing.assert_allclose(
    g, [0.25 * 0.8, 0.5, 1, 0.25 + 0.25 * 0.6, 0.5 + 0.125 + 0.25 * 0.9, 0.7, 0.9, 0], atol=1e-6
  )
  batch = _sample(buf, 1, 1, "single", td_steps=1)
  starts = batch.observation[:, 0].astype(int)
  want = {1: [0.8, 1.0], 2: [1, 0], 4: [1.1, 1.15], 5: [1.15, 0.9]}
  for n, s in enumerate(starts):
    np.testing.assert_allclose(batch.target_value[n], want[s], atol=1e-6)


def test_truncation_bootstraps_from_the_last_decision():
  lane = [
    _step(0, action=0, r=0.1, sv=0.5, nxt=CHANCE),  # 0
    _step(CHANCE, action=A, r=0.2, nxt=0),  # 1
    _step(0, action=2, r=0.3, sv=0.7, nxt=CHANCE),  # 2
    _step(CHANCE, action=A + 1, r=0.4, nxt=TERMINAL, done=True, trunc=True),
    _step(0, action=1, r=0.0, sv=0.0, nxt=TERMINAL, done=True),  # 4
    _step(0, valid=False),
    _step(0, valid=False),  # padding
  ]
  buf = _buffer([lane], 1, capacity=7)
  g = np.asarray(_value_targets(buf, num_players=1, payoff="single"))
  np.testing.assert_allclose(g[:, 0, 0], [0.1 + 0.2 + 0.7, 0.9, 0.7, 0.4, 0, 0, 0], atol=1e-6)
  np.testing.assert_array_equal(np.asarray(_start_mask(buf, 3))[:, 0], [1, 0, 1, 0, 1, 0, 0])
  expected = {
    0: dict(
      value=[1.0, 0.9, 0.7, 0.4],
      reward=[0.1, 0.2, 0.3],
      identity=[1, 0, 1],
      actions=[0, A, 2],
      policy_mask=[1, 0, 1, 0],
      chance_mask=[0, 1, 0, 1],
    ),
    2: dict(
      value=[0.7, 0.4, 0, 0],
      reward=[0.3, 0.4, 0],
      identity=[1, T_ID, T_ID],
      actions=[2, A + 1, -1],
      policy_mask=[1, 0, 0, 0],
      chance_mask=[0, 1, 0, 0],
    ),
    4: dict(
      value=[0, 0, 0, 0],
      reward=[0, 0, 0],
      identity=[T_ID] * 3,
      actions=[1, -1, -1],
      policy_mask=[1, 0, 0, 0],
      chance_mask=[0, 0, 0, 0],
    ),
  }
  _check(_sample(buf, 3, 1, "single"), expected, 3)


# Two players with a roll between turns. Episode 1: p0, p1, chance, p0 wins.
# Episode 2 starts with p1 and runs into the write head.
def _two_player(win):
  return [
    _step(0, action=0, sv=0.4, nxt=1),  # 0
    _step(1, action=1, sv=0.3, nxt=CHANCE),  # 1
    _step(CHANCE, action=A + 0, nxt=0),  # 2
    _step(0, action=2, r=win, sv=0.9, nxt=TERMINAL, done=True),  # 3
    _step(1, action=0, sv=0.2, nxt=0),  # 4
    _step(0, action=0, sv=0.7, nxt=1),  # 5 (head)
  ]


P2_TERM, P2_CHANCE = 3, 2


def test_zero_sum_points_of_view():
  buf = _buffer([_two_player([1.0, -1.0])], 2, capacity=6)
  g = np.asarray(_value_targets(buf, num_players=2, payoff="zero_sum"))
  np.testing.assert_allclose(g[:, 0], [[1, -1]] * 4 + [[0.7, -0.7]] * 2, atol=1e-6)
  expected = {
    0: dict(
      value=[1, 1, 1],
      reward=[0, 0],
      identity=[1, P2_CHANCE],
      actions=[0, 1],
      policy_mask=[1, 1, 0],
      chance_mask=[0, 0, 1],
    ),
    1: dict(
      value=[-1, -1, -1],
      reward=[0, 0],
      identity=[P2_CHANCE, 1],
      actions=[1, A],
      policy_mask=[1, 0, 1],
      chance_mask=[0, 1, 0],
    ),
    3: dict(
      value=[1, 0, 0],
      reward=[1, 0],
      identity=[P2_TERM, P2_TERM],
      actions=[2, -1],
      policy_mask=[1, 0, 0],
      chance_mask=[0, 0, 0],
    ),
  }
  _check(_sample(buf, 2, 2, "zero_sum"), expected, 2)
  # n-step: the bootstrap value is the other player's search value, flipped.
  g = np.asarray(_value_targets(buf, num_players=2, payoff="zero_sum", td_steps=1))[:, 0]
  np.testing.assert_allclose(g[0], [-0.3, 0.3], atol=1e-6)
  np.testing.assert_allclose(g[1], [0.9, -0.9], atol=1e-6)
  np.testing.assert_allclose(g[4], [0.7, -0.7], atol=1e-6)
  batch = _sample(buf, 2, 2, "zero_sum", td_steps=1)
  for n, s in enumerate(batch.observation[:, 0].astype(int)):
    want = {0: [-0.3, 0.9, 0.9], 1: [-0.9, -0.9, -1], 3: [1, 0, 0]}[s]
    np.testing.assert_allclose(batch.target_value[n], want, atol=1e-6)


def test_collaborative_does_not_flip():
  buf = _buffer([_two_player([1.0, 1.0])], 2, capacity=6)
  batch = _sample(buf, 2, 2, "collaborative", td_steps=1)
  for n, s in enumerate(batch.observation[:, 0].astype(int)):
    want = {0: [0.3, 0.9, 0.9], 1: [0.9, 0.9, 1], 3: [1, 0, 0]}[s]
    np.testing.assert_allclose(batch.target_value[n], want, atol=1e-6)
  _check(
    _sample(buf, 2, 2, "collaborative"),
    {
      0: dict(
        value=[1, 1, 1],
        reward=[0, 0],
        identity=[1, P2_CHANCE],
        actions=[0, 1],
        policy_mask=[1, 1, 0],
        chance_mask=[0, 0, 1],
      ),
      1: dict(
        value=[1, 1, 1],
        reward=[0, 0],
        identity=[P2_CHANCE, 1],
        actions=[1, A],
        policy_mask=[1, 0, 1],
        chance_mask=[0, 1, 0],
      ),
      3: dict(
        value=[1, 0, 0],
        reward=[1, 0],
        identity=[P2_TERM, P2_TERM],
        actions=[2, -1],
        policy_mask=[1, 0, 0],
        chance_mask=[0, 0, 0],
      ),
    },
    2,
  )


def test_ring_wrap_around_and_write_head():
  """Two lanes, capacity 5, 7 steps written in two chunks: the oldest two are
  overwritten, the logical order wraps, and no sample crosses the head."""
  other = [_step(0, action=t % A, r=0.0, sv=0.1 * t, nxt=0) for t in range(7)]
  lanes = [SINGLE, other]
  example = jax.tree.map(lambda x: x[0, 0], _chunk(lanes, 1))
  buf = replay.init_buffer(example, 5, 2)
  buf = _add(buf, _chunk([l[:3] for l in lanes], 1))
  buf = _add(buf, _chunk([l[3:] for l in lanes], 1, first_id=3))
  np.testing.assert_array_equal(buf.write, [2, 2])
  np.testing.assert_array_equal(buf.count, [5, 5])
  np.testing.assert_array_equal(buf.added, [7, 7])
  # Physical slots hold times [5, 6, 2, 3, 4].
  np.testing.assert_array_equal(buf.data.observation[:, 0, 0], [5, 6, 2, 3, 4])
  mask = np.asarray(_start_mask(buf, 2))
  # Lane 0: starts at t=2 (ends there) and t=4; lane 1: t=2..4 (t+2 <= 6).
  np.testing.assert_array_equal(mask[:, 0], [0, 0, 1, 0, 1])
  np.testing.assert_array_equal(mask[:, 1], [0, 0, 1, 1, 1])
  batch = _sample(buf, 2, 1, "single")
  starts = batch.observation[:, 0].astype(int)
  assert set(starts) <= {2, 4, 102, 103, 104}
  expected = {
    2: dict(
      value=[1, 0, 0],
      reward=[1, 0],
      identity=[T_ID, T_ID],
      actions=[0, -1],
      policy_mask=[1, 0, 0],
      chance_mask=[0, 0, 0],
    ),
    4: dict(
      value=[1.65, 1.15, 0.9],
      reward=[0.5, 0.25],
      identity=[0, 0],
      actions=[1, 1],
      policy_mask=[1, 1, 1],
      chance_mask=[0, 0, 0],
    ),
  }
  for t in (2, 3, 4):
    expected[100 + t] = dict(
      value=[0.6] * 3,
      reward=[0, 0],
      identity=[0, 0],
      actions=[t % A, (t + 1) % A],
      policy_mask=[1, 1, 1],
      chance_mask=[0, 0, 0],
    )
  _check(batch, expected, 2)


def test_sample_matches_a_real_env_rollout_shapes():
  env = envs.make("catch", rows=4, columns=3)
  buf = replay.init_buffer(replay.example_transition(env), 16, 2)
  assert buf.data.observation.shape == (16, 2, 4, 3, 1)
  assert buf.data.chance_probs.shape == (16, 2, 3)
  assert not bool(jax.jit(replay.can_sample, static_argnums=1)(buf, 2))
  batch = _jit_sample(
    buf, jax.random.PRNGKey(0), 4, K=2, num_players=1, num_actions=3, payoff="single"
  )
  assert batch.target_policy.shape == (4, 3, 3)
  assert batch.target_chance.shape == (4, 3, 3)
  assert all(
    bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(batch) if x.dtype == jnp.float32
  )


def test_wrong_shapes_are_named_at_trace_time():
  # jax.eval_shape traces without compiling: the checks cost nothing at run time.
  env = envs.make("catch", rows=4, columns=3)
  buf = jax.eval_shape(lambda: replay.init_buffer(replay.example_transition(env), 16, 2))
  chunk = jax.tree.map(lambda x: jax.ShapeDtypeStruct((4,) + x.shape[1:], x.dtype), buf.data)
  jax.eval_shape(replay.add, buf, chunk)
  wide = chunk.replace(search_policy=jax.ShapeDtypeStruct((4, 2, 4), jnp.float32))
  with pytest.raises(AssertionError, match=r"chunk\.search_policy"):
    jax.eval_shape(replay.add, buf, wide)
  sample = functools.partial(replay.sample, K=2, num_players=1, num_actions=3, payoff="single")
  batch = jax.eval_shape(lambda b: sample(b, jax.random.PRNGKey(0), 4), buf)
  replay.check_batch(batch, observation_shape=(4, 3, 1), num_actions=3, num_chance=3)
  for name, shape in (("target_value", (4, 2)), ("successor_observation", (4, 2, 12))):
    bad = batch.replace(**{name: jax.ShapeDtypeStruct(shape, jnp.float32)})
    with pytest.raises(AssertionError, match=f"Batch.{name}"):
      replay.check_batch(bad)
  with pytest.raises(AssertionError, match="Batch.target_policy"):
    replay.check_batch(batch, num_actions=4)


def test_bad_arguments():
  buf = _buffer([SINGLE], 1, capacity=8)
  with pytest.raises(ValueError, match="payoff"):
    replay.sample(
      buf, jax.random.PRNGKey(0), 4, K=2, num_players=1, num_actions=A, payoff="general_sum"
    )
  with pytest.raises(ValueError, match="num_players == 2"):
    _value_targets(buf, num_players=3, payoff="zero_sum")
  with pytest.raises(ValueError, match="td_steps"):
    _value_targets(buf, num_players=1, payoff="single", td_steps=-1)
  with pytest.raises(ValueError, match="does not fit"):
    replay.add(
      replay.init_buffer(jax.tree.map(lambda x: x[0, 0], _chunk([SINGLE], 1)), 3, 1),
      _chunk([SINGLE], 1),
    )


# ------------------------------------------- random lanes vs a plain reference


def _random_lane(rng, length, num_players):
  """Episodes of random decision/chance steps; some end by truncation, some
  are followed by invalid padding steps."""
  steps = []
  while len(steps) < length:
    ep_len = int(rng.integers(1, 7))
    trunc = bool(rng.random() < 0.3)
    players = [int(rng.choice([CHANCE] + list(range(num_players)))) for _ in range(ep_len)]
    for i, p in enumerate(players):
      last = i == ep_len - 1
      nxt = TERMINAL if last else players[i + 1]
      r = [float(x) for x in rng.integers(-2, 3, num_players)]
      sv = float(np.round(rng.uniform(-1, 1), 2)) if p >= 0 else 0.0
      action = int(rng.integers(0, A)) if p >= 0 else A + int(rng.integers(0, C))
      steps.append(_step(p, action=action, r=r, sv=sv, nxt=nxt, done=last, trunc=last and trunc))
    for _ in range(int(rng.integers(0, 2))):
      steps.append(_step(0, valid=False))
  return steps[:length]


def _reference(window, num_players, payoff, k, td_steps, discount):
  """Per-step value targets [T, P] and start flags, the slow obvious way."""
  n = len(window)

  def vvec(s):
    if payoff == "zero_sum":
      return np.array([s["sv"] if q == s["player"] else -s["sv"] for q in range(num_players)])
    return np.full(num_players, s["sv"])

  def seg_end(j):
    for i in range(j, n):
      s = window[i]
      if s["done"] or i + 1 >= n or not window[i + 1]["valid"]:
        return i
    return n - 1

  values, starts = np.zeros((n, num_players)), np.zeros(n, bool)
  for j, s in enumerate(window):
    if not s["valid"]:
      continue
    e = seg_end(j)
    terminated = window[e]["done"] and not window[e]["trunc"]
    decs = [i for i in range(j, e + 1) if window[i]["player"] >= 0]
    stop, boot = e, None  # Monte-Carlo, cut at the last decision
    if not terminated and decs:
      stop, boot = decs[-1], decs[-1]
    if td_steps:
      later = [i for i in decs if i >= j + td_steps]
      if later and (boot is None or later[0] <= boot):
        stop, boot = later[0], later[0]
    g = np.zeros(num_players)
    last = stop if boot is None else boot - 1
    for i in range(j, last + 1):
      g += discount ** (i - j) * np.asarray(window[i]["r"])
    if boot is not None:
      g += discount ** (boot - j) * vvec(window[boot])
    values[j] = g
    starts[j] = s["player"] >= 0 and (window[e]["done"] or j + k <= e)
  return values, starts


@pytest.mark.parametrize(
  "payoff,num_players,td_steps,discount",
  [
    # (single-player MC and n-step have their hand-computed tests above)
    ("zero_sum", 2, 2, 0.9),
    ("collaborative", 2, 3, 0.8),
    pytest.param("single", 1, 0, 1.0, marks=pytest.mark.slow),
  ],
)
def test_random_lanes_match_the_reference(payoff, num_players, td_steps, discount):
  rng = np.random.default_rng(7)
  cap, total, chunk, k, lanes_n = 12, 20, 5, 3, 3
  lanes = [_random_lane(rng, total, num_players) for _ in range(lanes_n)]
  for lane in lanes:  # rewards as lists of P
    for s in lane:
      s["r"] = list(np.resize(s["r"], num_players))
  example = jax.tree.map(lambda x: x[0, 0], _chunk(lanes, num_players))
  buf = replay.init_buffer(example, cap, lanes_n)
  for start in range(0, total, chunk):
    buf = _add(buf, _chunk([l[start : start + chunk] for l in lanes], num_players, first_id=start))
  slots = (int(buf.write[0]) + np.arange(cap)) % cap  # logical -> physical
  got_v = np.asarray(
    _value_targets(
      buf, num_players=num_players, payoff=payoff, td_steps=td_steps, discount=discount
    )
  )
  got_s = np.asarray(_start_mask(buf, k))
  expected = {}
  for b, lane in enumerate(lanes):
    window = lane[total - cap :]
    values, starts = _reference(window, num_players, payoff, k, td_steps, discount)
    np.testing.assert_allclose(got_v[slots, b], values, atol=1e-5, err_msg=f"lane {b}")
    np.testing.assert_array_equal(got_s[slots, b], starts, err_msg=f"lane {b}")
    for j in np.flatnonzero(starts):
      root = window[j]["player"]
      e = next(
        i for i in range(j, cap) if window[i]["done"] or i + 1 >= cap or not window[i + 1]["valid"]
      )
      alive = [j + i <= e for i in range(k + 1)]
      at = lambda i: window[min(j + i, cap - 1)]
      rel = lambda p: (
        (p - root) % num_players if p >= 0 else (num_players if p == CHANCE else num_players + 1)
      )
      expected[100 * b + total - cap + j] = dict(
        value=[values[j + i, root] if alive[i] else 0 for i in range(k + 1)],
        reward=[at(i)["r"][root] if alive[i] else 0 for i in range(k)],
        identity=[rel(at(i)["nxt"]) if alive[i] else num_players + 1 for i in range(k)],
        actions=[at(i)["action"] if alive[i] else -1 for i in range(k)],
        policy_mask=[alive[i] and at(i)["player"] >= 0 for i in range(k + 1)],
        chance_mask=[alive[i] and at(i)["player"] == CHANCE for i in range(k + 1)],
      )
  assert len(expected) >= 5
  _check(_sample(buf, k, num_players, payoff, td_steps, discount), expected, k)


# ------------------------------------------------ the stratified draw

# start_ok [L=5, 3 lanes]: lane 0 may start at t = 1, 3; lane 1 at 4; lane 2 at 0, 2, 4.
_OK = np.zeros((5, 3), bool)
_OK[[1, 3], 0] = True
_OK[4, 1] = True
_OK[[0, 2, 4], 2] = True


def _starts(ok, u, batch_size, rows=None, lane0=0):
  rows = np.arange(batch_size) if rows is None else np.asarray(rows)
  i, lane = sample_lib._stratified_starts(
    jnp.asarray(ok),
    jnp.asarray(rows),
    jnp.int32(lane0),
    jnp.asarray(u, jnp.float32),
    3,
    batch_size,
  )
  return np.asarray(i).tolist(), np.asarray(lane).tolist()


def test_each_lane_gives_its_rows_uniformly_over_its_starts():
  # 6 rows over 3 lanes: rows 2l, 2l + 1 come from lane l; u picks the
  # floor(u * m)-th of the lane's m valid starts.
  i, lane = _starts(_OK, [0.2, 0.7, 0.0, 0.99, 0.1, 0.99], 6)
  assert lane == [0, 0, 1, 1, 2, 2]
  assert i == [1, 3, 4, 4, 0, 4]
  # The same rows computed on lanes 1..2 alone (a device's block) agree.
  i2, lane2 = _starts(_OK[:, 1:], [0.0, 0.99, 0.1, 0.99], 6, rows=[2, 3, 4, 5], lane0=1)
  assert (i2, [x + 1 for x in lane2]) == (i[2:], lane[2:])


def test_fewer_rows_than_lanes_draw_from_a_block_of_lanes():
  # 2 rows over 3 lanes: row 0 from lane 0, row 1 from lanes 1..2, whose four
  # starts are taken in lane-major order (1, 4), (2, 0), (2, 2), (2, 4).
  for u1, want in [(0.1, (4, 1)), (0.3, (0, 2)), (0.6, (2, 2)), (0.9, (4, 2))]:
    i, lane = _starts(_OK, [0.6, u1], 2)
    assert (i[0], lane[0]) == (3, 0)
    assert (i[1], lane[1]) == want


def test_a_lane_without_starts_is_reported():
  ok = _OK.copy()
  ok[:, 1] = False
  assert bool(replay.starts_everywhere(jnp.asarray(_OK), 6))
  assert not bool(replay.starts_everywhere(jnp.asarray(ok), 6))
  assert bool(replay.starts_everywhere(jnp.asarray(ok), 2))  # lane 1 shares row 1 with lane 2
  i, lane = _starts(ok, [0.0, 0.0, 0.5, 0.5, 0.0, 0.0], 6)
  assert lane[2:4] == [1, 1] and i[2:4] == [2, 2]  # defined: lane lo, time floor(u L)


def _lane_block(tree, start, size):
  """Lanes `[start, start + size)` of a replay pytree: `[L, B, ...]` leaves
  along axis 1, `[B]` counters along axis 0 (what a device holds)."""
  take = lambda x: jax.lax.slice_in_dim(x, start, start + size, axis=0 if x.ndim == 1 else 1)
  return jax.tree.map(take, tree)


def test_shards_build_the_rows_of_the_same_batch():
  """S shards of a random 4-lane buffer (S = 1, 2, 4), each sampling from its
  own lanes alone, build the rows of the one batch; it is `targets_at` of
  `sample_starts`, and every lane gives its share of the rows."""
  rng = np.random.default_rng(11)
  lanes = [_random_lane(rng, 12, 2) for _ in range(4)]
  buf = _buffer(lanes, 2, capacity=12)
  prepared = replay.prepare(buf, K=2, num_players=2, payoff="zero_sum")
  key = jax.random.PRNGKey(5)
  kw = dict(K=2, num_players=2, num_actions=A)
  starts = replay.sample_starts(prepared, key, 8)
  assert np.bincount(np.asarray(starts.lane), minlength=4).tolist() == [2, 2, 2, 2]
  assert np.asarray(prepared.start_ok)[np.asarray(starts.i), np.asarray(starts.lane)].all()
  want = jax.device_get(replay.targets_at(prepared, starts, batch_size=8, **kw))
  for shards in (1, 2, 4):
    size = 4 // shards
    parts = [
      replay.sample_prepared(
        _lane_block(prepared, d * size, size), key, 8, shard=d, num_shards=shards, **kw
      )
      for d in range(shards)
    ]
    got = jax.tree.map(lambda *xs: np.concatenate(xs), *jax.device_get(parts))
    jax.tree.map(np.testing.assert_array_equal, got, want)
    for d in range(shards):
      block = _lane_block(prepared, d * size, size)
      assert bool(replay.starts_everywhere(block.start_ok, 8, shard=d, num_shards=shards))
  with pytest.raises(ValueError, match="does not split over 3 shards"):
    replay.sample_prepared(prepared, key, 8, shard=0, num_shards=3, **kw)


@pytest.mark.slow
def test_sampling_costs_less_than_an_update():
  """Nannon-sized buffer (256 x 128 steps of random play), batch 256, K=6:
  prints ms per `sample` and per loss gradient of the paper's MLP, and checks
  that target making is the cheaper of the two. Run with -s to see them."""
  import time
  from anakin_mz.core.loss import ndmz_loss
  from anakin_mz.core.networks import Network, NetworkConfig

  env = envs.make("nannon")
  cap, lanes, n, k = 256, 128, 256, 6

  def one(s, key):
    k_act, k_chance, k_reset = jax.random.split(key, 3)
    logits = jnp.where(s.legal_action_mask, 0.0, -1e9)
    action = jax.random.categorical(k_act, logits)
    outcome = jax.vmap(lambda kk, p: jax.random.categorical(kk, jnp.log(p)))(
      jax.random.split(k_chance, lanes), s.chance_probs
    )
    chance = s.current_player == CHANCE
    nxt = jax.vmap(env.step)(s, jnp.where(chance, outcome, action))
    rec = replay.Transition(
      observation=s.observation,
      player=s.current_player,
      action=jnp.where(chance, env.num_actions + outcome, action),
      rewards=nxt.rewards,
      search_policy=jax.nn.softmax(logits),
      search_value=jnp.zeros((lanes,)),
      chance_probs=s.chance_probs,
      next_player=nxt.current_player,
      done=nxt.done,
      truncated=nxt.truncated,
      valid=jnp.ones((lanes,), bool),
    )
    fresh = jax.vmap(env.init)(jax.random.split(k_reset, lanes))
    nxt = jax.tree.map(
      lambda f, x: jnp.where(nxt.done.reshape((-1,) + (1,) * (x.ndim - 1)), f, x), fresh, nxt
    )
    return nxt, rec

  @jax.jit
  def fill(key):
    s = jax.vmap(env.init)(jax.random.split(key, lanes))
    _, chunk = jax.lax.scan(one, s, jax.random.split(key, cap))
    return replay.add(replay.init_buffer(replay.example_transition(env), cap, lanes), chunk)

  buf = fill(jax.random.PRNGKey(0))
  samp = jax.jit(
    lambda b, key: replay.sample(
      b, key, n, K=k, num_players=2, num_actions=env.num_actions, payoff="zero_sum"
    )
  )
  net = Network(env, NetworkConfig(hidden=(256, 256), latent_dim=128))
  params = net.init(jax.random.PRNGKey(0))
  grad = jax.jit(jax.grad(lambda p, b: ndmz_loss(p, net, b)[0]))

  def per_call(fn, reps=10):
    jax.block_until_ready(fn(0))
    start = time.perf_counter()
    for i in range(reps):
      out = fn(i)
    jax.block_until_ready(out)
    return 1000 * (time.perf_counter() - start) / reps

  batch = samp(buf, jax.random.PRNGKey(1))
  ms_sample = per_call(lambda i: samp(buf, jax.random.PRNGKey(i)))
  ms_grad = per_call(lambda i: grad(params, batch))
  print(
    f"\nsample {ms_sample:.1f} ms, gradient {ms_grad:.1f} ms "
    f"(buffer {cap}x{lanes}, batch {n}, K={k})"
  )
  assert ms_sample < ms_grad
