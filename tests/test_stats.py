"""anakin_mz.eval.stats: Wilson intervals, mean intervals and Elo fitting."""

import math

import numpy as np
import pytest

from anakin_mz.eval import stats


@pytest.mark.parametrize(
  "k,n,lo,hi",
  [
    # Textbook values (Wilson 1927; Newcombe 1998, Table I uses 95%).
    (5, 10, 0.2366, 0.7634),
    (8, 10, 0.4902, 0.9433),
    (0, 10, 0.0, 0.2775),
    (10, 10, 0.7225, 1.0),
    (81, 263, 0.2553, 0.3662),  # Newcombe's example 81/263
  ],
)
def test_wilson_known_values(k, n, lo, hi):
  got = stats.wilson_interval(k, n)
  assert got == pytest.approx((lo, hi), abs=6e-5)


def test_wilson_is_symmetric_and_contains_the_estimate():
  for n in (1, 7, 100, 2000):
    for k in range(0, n + 1, max(1, n // 7)):
      lo, hi = stats.wilson_interval(k, n)
      lo2, hi2 = stats.wilson_interval(n - k, n)
      assert lo <= k / n <= hi
      assert (lo, hi) == pytest.approx((1 - hi2, 1 - lo2), abs=1e-12)
  # Wider at higher confidence, narrower with more games.
  assert stats.wilson_interval(30, 60, 0.99)[0] < stats.wilson_interval(30, 60)[0]
  assert stats.wilson_interval(300, 600)[0] > stats.wilson_interval(30, 60)[0]


def test_wilson_bad_input():
  with pytest.raises(ValueError, match="successes must be in"):
    stats.wilson_interval(11, 10)
  with pytest.raises(ValueError, match="confidence"):
    stats.wilson_interval(1, 10, confidence=1.5)
  assert stats.wilson_interval(0, 0) == (0.0, 1.0)


def test_mean_interval_and_win_draw_loss():
  scores = np.array([1, 1, 1, 0, -1, -1, 1, 0, 1, 1], np.float32)
  mean, std, lo, hi = stats.mean_interval(scores)
  assert mean == pytest.approx(0.4)
  assert std == pytest.approx(np.std(scores))
  half = 1.959964 * np.std(scores, ddof=1) / math.sqrt(10)
  assert (lo, hi) == pytest.approx((0.4 - half, 0.4 + half), abs=1e-5)
  wdl = stats.win_draw_loss(scores)
  assert wdl["games"] == 10
  assert [wdl[k]["count"] for k in ("win", "draw", "loss")] == [6, 2, 2]
  assert (wdl["win"]["low"], wdl["win"]["high"]) == stats.wilson_interval(6, 10)
  assert wdl["points"]["mean"] == pytest.approx(0.7)


def test_pooled_figures_are_those_of_the_games_put_together():
  """From each sample's (mean, std, count) or counts alone, the figures of
  all their values at once: samples of different sizes and spreads (the
  last checkpoints of a run, `report.evaluate_last_checkpoints`)."""
  rng = np.random.default_rng(0)
  parts = [rng.normal(m, s, n) for m, s, n in ((3.0, 1.0, 7), (5.0, 4.0, 20), (-1.0, 0.5, 2))]
  summaries = [(float(x.mean()), float(x.std()), x.size) for x in parts]
  want = stats.mean_interval(np.concatenate(parts))
  assert stats.pooled_mean_interval(summaries) == pytest.approx(want, rel=1e-12)
  assert stats.pooled_mean_interval(summaries[:1]) == pytest.approx(stats.mean_interval(parts[0]))
  assert stats.pooled_mean_interval([(2.0, 0.0, 1)]) == (2.0, 0.0, 2.0, 2.0)
  with pytest.raises(ValueError, match="at least one part"):
    stats.pooled_mean_interval([])
  with pytest.raises(ValueError, match="count >= 1"):
    stats.pooled_mean_interval([(1.0, 0.0, 0)])
  games = [np.sign(rng.normal(0.2 * i, 1.0, 9 + i)).astype(np.float32) for i in range(3)]
  games[1][:2] = 0.0  # draws
  got = stats.pooled_win_draw_loss([stats.win_draw_loss(g) for g in games])
  assert got == stats.win_draw_loss(np.concatenate(games))


def _table(n, pairs):
  points = np.zeros((n, n))
  games = np.zeros((n, n))
  for i, j, g, p in pairs:
    games[i, j] = games[j, i] = g
    points[i, j], points[j, i] = p, g - p
  return points, games


def test_elo_two_players_closed_form():
  # 300 points of 400: the MLE difference is 400 log10(3); its variance in
  # natural units is 1 / (n p (1 - p)).
  points, games = _table(2, [(0, 1, 400, 300)])
  fit = stats.fit_elo(["a", "b"], points, games, anchor="b", prior_draws=0)
  assert fit.elo[0] == pytest.approx(400 * math.log10(3), abs=1e-6)
  assert fit.elo[1] == 0 and fit.stderr[1] == 0
  se = math.sqrt(1 / (400 * 0.75 * 0.25)) * 400 / math.log(10)
  assert fit.stderr[0] == pytest.approx(se, rel=1e-6)
  assert fit.low[0] == pytest.approx(fit.elo[0] - 1.959964 * se, rel=1e-5)
  assert stats.expected_score(fit.elo[0], 0.0) == pytest.approx(0.75)


def test_elo_recovers_ratings_from_expected_scores():
  true = np.array([0.0, 100.0, 250.0, -50.0, 400.0])
  n = len(true)
  pairs = []
  for i in range(n):
    for j in range(i + 1, n):
      g = 50.0 + 10 * (i + j)
      pairs.append((i, j, g, g * stats.expected_score(true[i], true[j])))
  points, games = _table(n, pairs)
  fit = stats.fit_elo("abcde", points, games, anchor="a", prior_draws=0)
  np.testing.assert_allclose(fit.elo, true - true[0], atol=1e-6)
  mean_fit = stats.fit_elo("abcde", points, games, prior_draws=0)
  np.testing.assert_allclose(mean_fit.elo, true - true.mean(), atol=1e-6)


def test_elo_interval_coverage():
  # Simulated round robins: the 95% interval of b - a should cover the truth
  # in about 95% of tournaments (binomial sd over 300 runs is ~1.3%).
  rng = np.random.default_rng(12345)
  true = np.array([0.0, 120.0, -80.0])
  covered = 0
  runs = 300
  for _ in range(runs):
    pairs = []
    for i in range(3):
      for j in range(i + 1, 3):
        g = 200
        pairs.append((i, j, g, rng.binomial(g, stats.expected_score(true[i], true[j]))))
    points, games = _table(3, pairs)
    fit = stats.fit_elo("abc", points, games, anchor="a", prior_draws=0)
    covered += fit.low[1] <= true[1] <= fit.high[1]
  assert 0.90 <= covered / runs <= 0.99


def test_elo_perfect_record_is_finite_with_prior_draws():
  points, games = _table(3, [(0, 1, 20, 20), (1, 2, 20, 20), (0, 2, 20, 20)])
  fit = stats.fit_elo(["top", "mid", "low"], points, games, anchor="low")
  assert np.all(np.isfinite(fit.elo)) and np.all(np.isfinite(fit.stderr))
  assert fit.elo[0] > fit.elo[1] > fit.elo[2] == 0
  assert fit.as_dict()["top"]["games"] == 40


def test_elo_bad_input():
  points, games = _table(3, [(0, 1, 10, 5)])
  with pytest.raises(ValueError, match="not connected"):
    stats.fit_elo("abc", points, games)
  points, games = _table(2, [(0, 1, 10, 5)])
  with pytest.raises(ValueError, match="anchor 'z' is not a player"):
    stats.fit_elo("ab", points, games, anchor="z")
  with pytest.raises(ValueError, match="inconsistent"):
    stats.fit_elo("ab", points + 1, games)
  with pytest.raises(ValueError, match="distinct"):
    stats.fit_elo("aa", points, games)
