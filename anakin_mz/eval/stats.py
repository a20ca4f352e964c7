"""Statistics for evaluation: Wilson score intervals for win/draw/loss rates,
normal intervals for mean scores, and Elo ratings fitted by maximum likelihood
(Bradley-Terry) with intervals from the observed Fisher information.

Elo model: the expected score of player i against j is
`1 / (1 + 10 ** ((elo_j - elo_i) / 400))`; a draw counts as half a point.
Ratings are fitted by Newton's method on the log-likelihood of the points
scored. Only differences are identified: ratings are reported relative to an
`anchor` player (its Elo is 0 and its interval is empty), or with mean 0 when
there is no anchor. `prior_draws` virtual draws are added to every pair that
met, so a perfect record still gives finite ratings (BayesElo does the same).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

# Natural-log units -> Elo points.
ELO_PER_NAT = 400.0 / math.log(10.0)


def _z(confidence: float) -> float:
  """Two-sided standard-normal quantile for `confidence` in (0, 1)."""
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
  from statistics import NormalDist

  return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: float, n: float, confidence: float = 0.95) -> Tuple[float, float]:
  """Wilson score interval for a binomial proportion `successes / n`.

  Returns (low, high) in [0, 1]. With n = 0 the interval is (0, 1).

  Raises:
    ValueError: n < 0, or successes outside [0, n].
  """
  if n < 0:
    raise ValueError(f"n must be >= 0, got {n!r}")
  if not 0 <= successes <= n:
    raise ValueError(f"successes must be in [0, n={n}], got {successes!r}")
  if n == 0:
    return 0.0, 1.0
  z = _z(confidence)
  p = successes / n
  denom = 1.0 + z * z / n
  centre = (p + z * z / (2 * n)) / denom
  half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
  low = 0.0 if successes == 0 else max(0.0, centre - half)
  high = 1.0 if successes == n else min(1.0, centre + half)
  return low, high


def mean_interval(
  values: Sequence[float], confidence: float = 0.95
) -> Tuple[float, float, float, float]:
  """Mean of `values` with a normal-approximation interval.

  Returns (mean, std, low, high); std is the population std (ddof 0), the
  interval uses the sample std (ddof 1) / sqrt(n).
  """
  x = np.asarray(values, np.float64).reshape(-1)
  if x.size == 0:
    raise ValueError("mean_interval needs at least one value")
  mean = float(x.mean())
  std = float(x.std())
  if x.size < 2:
    return mean, std, mean, mean
  half = _z(confidence) * float(x.std(ddof=1)) / math.sqrt(x.size)
  return mean, std, mean - half, mean + half


def win_draw_loss(scores: Sequence[float], confidence: float = 0.95) -> Dict[str, object]:
  """Win/draw/loss counts, rates and Wilson intervals from per-game scores
  (> 0 win, == 0 draw, < 0 loss), plus the match score (win = 1, draw = 1/2)
  with its normal interval."""
  s = np.asarray(scores, np.float64).reshape(-1)
  n = int(s.size)
  out: Dict[str, object] = {"games": n}
  for name, count in (
    ("win", int(np.sum(s > 0))),
    ("draw", int(np.sum(s == 0))),
    ("loss", int(np.sum(s < 0))),
  ):
    lo, hi = wilson_interval(count, n, confidence)
    out[name] = {"count": count, "rate": count / n if n else float("nan"), "low": lo, "high": hi}
  if n:
    points = (s > 0) + 0.5 * (s == 0)
    mean, _, lo, hi = mean_interval(points, confidence)
    out["points"] = {"mean": mean, "low": lo, "high": hi}
  return out


def pooled_mean_interval(
  parts: Sequence[Tuple[float, float, int]], confidence: float = 0.95
) -> Tuple[float, float, float, float]:
  """`mean_interval` of the values of several samples put together, from
  each sample's (mean, population std, count) alone: the same (mean, std,
  low, high) to float rounding (the law of total variance).

  Raises:
    ValueError: no part, or a count < 1.
  """
  if not parts:
    raise ValueError("pooled_mean_interval needs at least one part")
  means = np.asarray([p[0] for p in parts], np.float64)
  stds = np.asarray([p[1] for p in parts], np.float64)
  counts = np.asarray([p[2] for p in parts], np.float64)
  if np.any(counts < 1):
    raise ValueError(f"every part needs a count >= 1, got {counts.tolist()}")
  n = counts.sum()
  mean = float((counts * means).sum() / n)
  var = float((counts * (stds**2 + (means - mean) ** 2)).sum() / n)  # population
  std = math.sqrt(max(var, 0.0))
  if n < 2:
    return mean, std, mean, mean
  half = _z(confidence) * math.sqrt(var * n / (n - 1)) / math.sqrt(n)
  return mean, std, mean - half, mean + half


def pooled_win_draw_loss(
  parts: Sequence[Dict[str, object]], confidence: float = 0.95
) -> Dict[str, object]:
  """`win_draw_loss` of the games of several matches put together, from
  each match's `win_draw_loss` result (its counts): the same dict."""
  counts = {
    name: sum(int(p[name]["count"]) for p in parts)  # type: ignore[index]
    for name in ("win", "draw", "loss")
  }
  # A game's points are 1, 1/2 or 0: the counts give every value back.
  points = [1.0] * counts["win"] + [0.5] * counts["draw"] + [0.0] * counts["loss"]
  return win_draw_loss([2.0 * p - 1.0 for p in points], confidence)


@dataclasses.dataclass(frozen=True)
class EloFit:
  """Result of `fit_elo`.

  Attributes:
    names: the players, in input order.
    elo: `[n]` ratings (anchor at 0, or mean 0).
    low, high: `[n]` bounds of the `confidence` intervals.
    stderr: `[n]` standard errors in Elo points (0 for the anchor).
    games: `[n]` games played by each player (virtual draws excluded).
    points: `[n]` points scored (virtual draws excluded).
    anchor: the anchor's name, or None.
  """

  names: Tuple[str, ...]
  elo: np.ndarray
  low: np.ndarray
  high: np.ndarray
  stderr: np.ndarray
  games: np.ndarray
  points: np.ndarray
  anchor: Optional[str]

  def as_dict(self) -> Dict[str, Dict[str, float]]:
    """{name: {elo, low, high, stderr, games, points}} (JSON-ready)."""
    return {
      n: {
        "elo": float(self.elo[i]),
        "low": float(self.low[i]),
        "high": float(self.high[i]),
        "stderr": float(self.stderr[i]),
        "games": float(self.games[i]),
        "points": float(self.points[i]),
      }
      for i, n in enumerate(self.names)
    }


def expected_score(elo_a: float, elo_b: float) -> float:
  """Expected score of a player rated `elo_a` against one rated `elo_b`."""
  return 1.0 / (1.0 + 10.0 ** ((elo_b - elo_a) / 400.0))


def fit_elo(
  names: Sequence[str],
  points: np.ndarray,
  games: np.ndarray,
  *,
  anchor: Optional[str] = None,
  prior_draws: float = 1.0,
  confidence: float = 0.95,
  max_iterations: int = 200,
  tol: float = 1e-10,
) -> EloFit:
  """Maximum-likelihood Elo ratings from a round robin (or any schedule).

  Args:
    names: `n` distinct player names.
    points: `[n, n]` points player i scored against j (win 1, draw 1/2).
    games: `[n, n]` games between i and j; must be symmetric, and
      `points + points.T == games`.
    anchor: a name whose rating is fixed at 0 (None: ratings have mean 0).
    prior_draws: virtual draws added to every pair that played (>= 0).
    confidence: level of the reported intervals.

  Raises:
    ValueError: shapes or names that do not fit, inconsistent tables, an
      unknown anchor, or players not connected by games.
  """
  names = tuple(str(n) for n in names)
  n = len(names)
  if n < 2:
    raise ValueError(f"fit_elo needs at least 2 players, got {n}")
  if len(set(names)) != n:
    raise ValueError(f"player names must be distinct, got {names}")
  pts = np.asarray(points, np.float64)
  gms = np.asarray(games, np.float64)
  if pts.shape != (n, n) or gms.shape != (n, n):
    raise ValueError(f"points and games must be [{n}, {n}], got {pts.shape} and {gms.shape}")
  if np.any(gms < 0) or np.any(pts < 0) or np.any(np.diag(gms) != 0):
    raise ValueError("games and points must be >= 0 with an empty diagonal")
  if not np.allclose(gms, gms.T) or not np.allclose(pts + pts.T, gms):
    raise ValueError(
      "inconsistent tables: need games symmetric and points[i, j] + points[j, i] == games[i, j]"
    )
  if prior_draws < 0:
    raise ValueError(f"prior_draws must be >= 0, got {prior_draws!r}")
  if anchor is not None and anchor not in names:
    raise ValueError(f"anchor {anchor!r} is not a player; players: {names}")
  _check_connected(names, gms)

  met = gms > 0
  g = gms + prior_draws * met
  s = pts + 0.5 * prior_draws * met
  theta = np.zeros(n)
  for _ in range(max_iterations):
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    grad = np.sum(s - g * p, axis=1)
    w = g * p * (1 - p)
    info = np.diag(w.sum(1)) - w  # observed information (= -Hessian)
    step = np.linalg.pinv(info) @ grad
    theta = theta + step
    theta -= theta.mean()
    if np.max(np.abs(step)) < tol:
      break
  p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
  w = g * p * (1 - p)
  cov = np.linalg.pinv(np.diag(w.sum(1)) - w)  # covariance of mean-0 ratings
  if anchor is not None:
    a = names.index(anchor)
    theta = theta - theta[a]
    var = np.diag(cov) + cov[a, a] - 2 * cov[:, a]
  else:
    var = np.diag(cov)
  se = np.sqrt(np.maximum(var, 0.0)) * ELO_PER_NAT
  elo = theta * ELO_PER_NAT
  z = _z(confidence)
  return EloFit(
    names=names,
    elo=elo,
    low=elo - z * se,
    high=elo + z * se,
    stderr=se,
    games=gms.sum(1),
    points=pts.sum(1),
    anchor=anchor,
  )


def _check_connected(names: Sequence[str], games: np.ndarray) -> None:
  n = len(names)
  seen = {0}
  todo = [0]
  while todo:
    i = todo.pop()
    for j in np.nonzero(games[i] > 0)[0]:
      if int(j) not in seen:
        seen.add(int(j))
        todo.append(int(j))
  if len(seen) != n:
    missing = [names[i] for i in range(n) if i not in seen]
    raise ValueError(
      f"players {missing} are not connected by games to "
      f"{names[0]!r}: their ratings are not identified"
    )
