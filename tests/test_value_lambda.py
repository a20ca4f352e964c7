"""Tests for the lambda-return value targets (`train.value_lambda`) and the
siblings bootstrap (`train.value_bootstrap`): hand-computed numbers on the
two-player lane of test_replay, the recursion against TD(lambda)'s forward
view (a weighted average of n-step returns) on random lanes, and the
config's refusals."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import tiny
from anakin_mz.core import replay
from test_replay import A, _buffer, _chunk, _random_lane, _two_player

_value_targets = jax.jit(
  replay.value_targets,
  static_argnames=("num_players", "payoff", "td_steps", "discount", "value_lambda", "bootstrap"),
)


def _p0(buf, **kw):
  """Player 0's value target of every step of lane 0."""
  return np.asarray(_value_targets(buf, num_players=2, payoff="zero_sum", **kw))[:, 0, 0]


def test_two_player_lane_by_hand():
  # Steps (player 0's view): 0 p0 V=.4 | 1 p1 V=-.3 | 2 chance | 3 p0 V=.9,
  # wins (r=1, the end) | 4 p1 V=-.2 | 5 p0 V=.7 at the write head (its
  # search value stands in for the rest). G_i = r_i + (1-l) V_{i+1} + l G_{i+1}
  # where i+1 is a decision step, r_i + G_{i+1} where it is chance.
  buf = _buffer([_two_player([1.0, -1.0])], 2, capacity=6)
  # l = 0.5: G2 = .5 * .9 + .5 * 1 = .95 = G1; G0 = .5 * -.3 + .5 * .95.
  got = np.asarray(_value_targets(buf, num_players=2, payoff="zero_sum", value_lambda=0.5))[:, 0]
  want = np.array([0.325, 0.95, 0.95, 1.0, 0.7, 0.7])
  np.testing.assert_allclose(got[:, 0], want, atol=1e-6)
  np.testing.assert_allclose(got[:, 1], -want, atol=1e-6)
  # l = 0: one step to the next decision step's value; l = 1: the outcome.
  np.testing.assert_allclose(_p0(buf, value_lambda=0.0), [-0.3, 0.9, 0.9, 1, 0.7, 0.7], atol=1e-6)
  np.testing.assert_allclose(_p0(buf, value_lambda=1.0), [1, 1, 1, 1, 0.7, 0.7], atol=1e-6)


def _forward_view(window, lam, discount):
  """Player 0's lambda-return of every step of a single-player lane, as
  TD(lambda)'s forward view: with d_1 < ... < d_M the decision steps after
  j in its segment and G^(n) the return bootstrapped at d_n, G = sum_n
  (1 - l) l^(n-1) G^(n) + l^M G^MC. In a segment cut before its end, the
  last decision step's value stands in for the rest (G^MC = G^(M) there, and
  at that step G = its value); past it, the rewards up to the cut."""
  n = len(window)
  out = np.zeros(n)
  for j, s in enumerate(window):
    if not s["valid"]:
      continue
    e = next(
      i for i in range(j, n) if window[i]["done"] or i + 1 >= n or not window[i + 1]["valid"]
    )
    terminated = window[e]["done"] and not window[e]["trunc"]
    decs = [i for i in range(j, e + 1) if window[i]["player"] >= 0]
    if not terminated and decs and decs[-1] == j:
      out[j] = s["sv"]
      continue
    if not terminated and decs and decs[-1] > j:
      mc_end, mc_boot = decs[-1], decs[-1]  # the cut: the last decision's value
    else:
      mc_end, mc_boot = e + 1, None
    after = [d for d in decs if d > j and (mc_boot is None or d <= mc_boot)]

    def ret(stop, boot):  # rewards j..stop-1, then the value at `boot`
      g = sum(discount ** (i - j) * window[i]["r"][0] for i in range(j, stop))
      return g + (discount ** (boot - j) * window[boot]["sv"] if boot is not None else 0.0)

    mc = ret(mc_end if mc_boot is None else mc_boot, mc_boot)
    if mc_boot is not None:
      after = after[:-1]  # its n-step return is the cut's return itself
    g = sum((1 - lam) * lam**k * ret(d, d) for k, d in enumerate(after))
    out[j] = g + lam ** len(after) * mc
  return out


@pytest.mark.parametrize("lam,discount", [(0.0, 1.0), (0.6, 0.9), (0.85, 1.0)])
def test_random_lanes_match_the_forward_view(lam, discount):
  rng = np.random.default_rng(3)
  cap, lanes_n = 14, 4
  lanes = [_random_lane(rng, cap, 1) for _ in range(lanes_n)]
  for lane in lanes:
    for s in lane:
      s["r"] = list(np.resize(s["r"], 1))
  buf = _buffer(lanes, 1, capacity=cap)
  got = np.asarray(
    _value_targets(buf, num_players=1, payoff="single", discount=discount, value_lambda=lam)
  )
  for b, lane in enumerate(lanes):
    np.testing.assert_allclose(
      got[:, b, 0], _forward_view(lane, lam, discount), atol=1e-5, err_msg=f"lane {b}"
    )
  if lam == 0.0:  # one step to the next decision = the 1-step target
    one = _value_targets(buf, num_players=1, payoff="single", discount=discount, td_steps=1)
    np.testing.assert_allclose(got, np.asarray(one), atol=1e-6)


def _with_siblings(lanes, num_players, siblings):
  """The buffer of `lanes` with sibling moves and values: `siblings[t]` is
  lane 0's (actions, q) at step t, (-1, 0) slots elsewhere."""
  chunk = _chunk(lanes, num_players)
  t_len, b_len = chunk.player.shape
  action = np.full((t_len, b_len, A), -1, np.int32)
  q = np.zeros((t_len, b_len, A), np.float32)
  for t, (acts, vals) in siblings.items():
    action[t, 0, : len(acts)] = acts
    q[t, 0, : len(vals)] = vals
  chunk = chunk.replace(sibling_action=jnp.asarray(action), sibling_q=jnp.asarray(q))
  buf = replay.init_buffer(jax.tree.map(lambda x: x[0, 0], chunk), t_len, b_len)
  return replay.add(buf, chunk)


def test_the_siblings_bootstrap_is_the_best_recorded_sibling():
  # Step 1 (p1 moves): siblings valued .1 and .6 from p1's view, so its
  # bootstrap is .6 (-.6 for p0), not its search value .3. Step 5: one
  # recorded sibling (-.2) and a slot marked -1 whose q must be ignored.
  # Step 3 records none: its search value (.9) stays.
  sib = {1: ([0, 2], [0.1, 0.6]), 5: ([1, -1], [-0.2, 5.0])}
  buf = _with_siblings([_two_player([1.0, -1.0])], 2, sib)
  got = _p0(buf, value_lambda=0.0, bootstrap="siblings")
  np.testing.assert_allclose(got, [-0.6, 0.9, 0.9, 1.0, -0.2, -0.2], atol=1e-6)
  # The n-step target bootstraps from the same values; the search's without.
  np.testing.assert_allclose(_p0(buf, td_steps=1, bootstrap="siblings")[0], -0.6, atol=1e-6)
  np.testing.assert_allclose(_p0(buf, td_steps=1)[0], -0.3, atol=1e-6)


def test_bad_arguments_are_refused():
  buf = _buffer([_two_player([1.0, -1.0])], 2, capacity=6)
  with pytest.raises(ValueError, match=r"value_lambda must be in \[0, 1\]"):
    replay.value_targets(buf, num_players=2, payoff="zero_sum", value_lambda=1.5)
  with pytest.raises(ValueError, match="use td_steps 0 with it"):
    replay.value_targets(buf, num_players=2, payoff="zero_sum", value_lambda=0.5, td_steps=2)
  with pytest.raises(ValueError, match="bootstrap must be one of search, siblings, got 'best'"):
    replay.value_targets(buf, num_players=2, payoff="zero_sum", bootstrap="best")
  with pytest.raises(ValueError, match="needs the buffer's sibling values"):
    replay.value_targets(buf, num_players=2, payoff="zero_sum", bootstrap="siblings")


@pytest.mark.parametrize(
  "overrides,match",
  [
    (["train.value_lambda=-0.1"], r"train.value_lambda must be in \[0, 1\]"),
    (["train.value_lambda=0.7", "train.td_steps=4"], "set td_steps to 0"),
    (["train.value_bootstrap=best"], "must be one of search, siblings, got 'best'"),
    (["train.value_bootstrap=siblings", "loss.sibling_value_weight=0"], "weight 0 turns off"),
    (
      ["train.value_bootstrap=siblings", "train.td_steps=4", "train.reanalyse_fraction=0.25"],
      "use one of them",
    ),
  ],
)
def test_the_config_refuses_what_it_cannot_do(overrides, match):
  with pytest.raises(ValueError, match=match):
    tiny.tiny_config("nannon", *overrides)


def test_the_learner_prepares_the_configured_targets():
  from anakin_mz.agents.ndmz import Learner

  cfg = tiny.tiny_config(
    "nannon", "train.td_steps=0", "train.value_lambda=0.5", "train.value_bootstrap=siblings"
  )
  buf = _with_siblings([_two_player([1.0, -1.0])], 2, {1: ([0, 2], [0.1, 0.6])})
  got = np.asarray(Learner(cfg)._prepare(buf).values)  # logical order = physical here
  want = replay.prepare(
    buf, K=2, num_players=2, payoff="zero_sum", value_lambda=0.5, bootstrap="siblings"
  ).values
  np.testing.assert_allclose(got, np.asarray(want), atol=1e-6)
  assert abs(got[0, 0, 0] - (0.5 * -0.6 + 0.5 * 0.95)) < 1e-6
