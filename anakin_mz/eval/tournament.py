"""Round-robin tournaments among saved agents and bots, with Elo ratings
(as MooZi 5.7 rated its Breakthrough checkpoints). `scripts/tournament.py` is
its command line.

Every pair of players meets in `games` games (each takes each seat in half
of them, `match.play_match`); checkpoints play the greedy search with their
own search config (`simulations` overrides it for all). Ratings are
maximum-likelihood Elo (`stats.fit_elo`) with 95% intervals.
Two-player zero-sum games only.
"""

from __future__ import annotations

import collections
import dataclasses
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import jax
import numpy as np

import envs
from anakin_mz.runtime import restore
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export
from anakin_mz.eval import match, opponents, stats


@dataclasses.dataclass
class Player:
  """A tournament entrant.

  `make(params)` builds its policy; `params` is passed to the jitted match
  as an argument, so checkpoints that share `static` (same game, network and
  search config, and agent) share one compiled match function.
  """

  name: str
  step: Optional[int]
  run: Optional[str]
  static: Tuple
  params: object
  make: Callable[[object], envs.Policy]
  source: Optional[str] = None  # the checkpoint or model as given


@dataclasses.dataclass
class Tournament:
  """A played round robin: players, points and games `[n, n]`, the Elo fit."""

  env_id: str
  players: List[Player]
  points: np.ndarray
  games: np.ndarray
  fit: stats.EloFit
  games_per_pair: int


def checkpoint_players(
  directory: str,
  step: Optional[int],
  env_id: Optional[str],
  simulations: Optional[int],
  all_steps: bool,
) -> List[Player]:
  """The player at `step` (default latest) of `directory`, or with
  `all_steps` one per saved step."""
  if all_steps:
    if step is not None:
      raise ValueError(f"--all-steps takes a directory, not a step ({step})")
    steps = ckpt.steps(directory)
    if not steps:
      ckpt.load_metadata(directory)  # raises the precise error
  else:
    steps = (step,)
  players = []
  for s in steps:
    agent = restore.load_agent(directory, s, expect_env=env_id)
    env_id = agent.env.id
    search = agent.config.playing_search
    if simulations is not None:
      search = dataclasses.replace(search, num_simulations=simulations)
    spec, network, env = agent.spec, agent.network, agent.env

    def make(params, spec=spec, network=network, env=env, search=search):
      return spec.search_policy(network, params, env, search)

    config = agent.config
    static = ("ckpt", config.env, config.env_params, config.network, search, config.agent)
    players.append(
      Player(
        name=f"{label(directory, agent.directory)}@{agent.step}",
        step=agent.step,
        run=os.path.realpath(agent.directory),
        static=static,
        params=agent.params,
        make=make,
        source=directory,
      )
    )
  return players


def label(spec: str, directory: str) -> str:
  """A checkpoint player's name (before `@step`): a shipped model's name, a
  model file's stem, or the run's directory (`runs/a` for
  `runs/a/checkpoints`, as for the logdir `runs/a`). `spec` is what the user
  gave, `directory` what it restored from (`restore.Agent.directory`)."""
  if export.resolve(spec) is not None:
    if not os.path.exists(spec):  # a shipped model's name
      return spec
    return os.path.splitext(os.path.basename(os.path.normpath(spec)))[0]
  path = os.path.normpath(os.path.abspath(directory))
  if os.path.basename(path) == "checkpoints":
    path = os.path.dirname(path)
  return os.path.basename(path)


def name_apart(players: List[Player]) -> None:
  """Refuses a checkpoint player given twice (the same files and step, by
  whatever path) and names distinct players that share a label (two runs'
  directories of one name, two model files of one stem) by their paths as
  given instead.

  Raises:
    ValueError: a player given twice.
  """
  seen: Dict[Tuple[str, Optional[int]], Player] = {}
  for p in players:
    if p.run is None:
      continue
    first = seen.setdefault((p.run, p.step), p)
    if first is not p:
      raise ValueError(
        f"a player appears twice: {p.name} ({p.source!r} and {first.source!r} are the same "
        f"checkpoint at step {p.step}); give each once"
      )
  counts = collections.Counter(p.name for p in players)
  for p in players:
    if p.run is not None and counts[p.name] > 1:
      p.name = f"{os.path.normpath(p.source or p.run)}@{p.step}"


def bot_player(spec: str, env: envs.Env, simulations: Optional[int]) -> Player:
  opp = opponents.make_opponent(spec, env, simulations=simulations)
  return Player(
    name=opp.name,
    step=None,
    run=None,
    static=("bot", opp.name),
    params=None,
    make=lambda params, p=opp.policy: p,
  )


def round_robin(
  players: List[Player], env: envs.Env, games: int, seed: int, log: Callable[[str], None] = print
) -> Tuple[np.ndarray, np.ndarray]:
  """Plays every pair; returns (points `[n, n]`, games `[n, n]`)."""
  n = len(players)
  points = np.zeros((n, n))
  played = np.zeros((n, n))
  compiled: Dict[Tuple, Callable] = {}
  key = jax.random.PRNGKey(seed)
  for i in range(n):
    for j in range(i + 1, n):
      a, b = players[i], players[j]
      sig = (a.static, b.static)
      if sig not in compiled:
        compiled[sig] = jax.jit(
          lambda k, pa, pb, a=a, b=b: match.play_match(env, a.make(pa), b.make(pb), k, games).score
        )
      key, k = jax.random.split(key)
      t0 = time.perf_counter()
      score = np.asarray(jax.device_get(compiled[sig](k, a.params, b.params)))
      p = float(np.sum(score > 0) + 0.5 * np.sum(score == 0))
      points[i, j], points[j, i] = p, games - p
      played[i, j] = played[j, i] = games
      log(
        f"{a.name:>28} vs {b.name:<28} {p:6.1f} : {games - p:6.1f}  "
        f"({time.perf_counter() - t0:.1f} s)"
      )
  return points, played


def run_tournament(
  *,
  checkpoints: Sequence[str] = (),
  step: Optional[int] = None,
  all_steps: Sequence[str] = (),
  bots: Sequence[str] = ("random",),
  games: int = 100,
  simulations: Optional[int] = None,
  seed: int = 0,
  anchor: Optional[str] = None,
  env_id: Optional[str] = None,
  log: Callable[[str], None] = print,
) -> Tournament:
  """Gathers the players (every step of each of `all_steps`, `step` or the
  latest of each of `checkpoints`, then the `bots` specs), plays the round
  robin and fits Elo, anchored at `anchor` (default: random if it plays,
  else mean 0).

  Raises:
    ValueError: bad arguments, checkpoints of different games or params, a
      game that is not two-player zero-sum, a bot that does not apply.
  """
  if not checkpoints and not all_steps:
    raise ValueError("give at least one --checkpoint or --all-steps")
  if games < 2 or games % 2:
    raise ValueError(f"--games must be an even number >= 2, got {games}")
  if simulations is not None and simulations < 1:
    raise ValueError("--simulations must be >= 1")
  players: List[Player] = []
  for directory in all_steps:
    players += checkpoint_players(directory, None, env_id, simulations, all_steps=True)
    env_id = env_id or players[0].static[1]
  for directory in checkpoints:
    players += checkpoint_players(directory, step, env_id, simulations, all_steps=False)
    env_id = env_id or players[0].static[1]
  env_params = {p.static[2] for p in players}
  if len(env_params) != 1:
    raise ValueError(
      f"the checkpoints play {env_id} with different params: {sorted(dict(e) for e in env_params)}"
    )
  env = envs.make(env_id, **dict(players[0].static[2]))
  if env.payoff != "zero_sum" or env.num_players != 2:
    raise ValueError(
      f"a tournament needs a two-player zero-sum game; {env_id} "
      f"is {env.payoff} with {env.num_players} player(s)"
    )
  name_apart(players)
  for spec in bots:
    players.append(bot_player(spec, env, simulations))
  names = [p.name for p in players]
  if len(set(names)) != len(names):
    raise ValueError(f"a player appears twice: {names}")
  if len(players) < 2:
    raise ValueError("a tournament needs at least two players")
  anchor = anchor or ("random" if "random" in names else None)
  if anchor is not None and anchor not in names:
    raise ValueError(f"--anchor {anchor!r} is not a player; players: {names}")
  log(f"{env_id}: {len(players)} players, {games} games per pair")
  points, played = round_robin(players, env, games, seed, log=log)
  fit = stats.fit_elo(names, points, played, anchor=anchor)
  return Tournament(
    env_id=env_id, players=players, points=points, games=played, fit=fit, games_per_pair=games
  )


def format_table(fit: stats.EloFit, players: List[Player]) -> str:
  order = np.argsort(-fit.elo)
  lines = [f"{'player':30} {'step':>7} {'Elo':>7}  {'95% interval':>17}  {'score':>6}  games"]
  for i in order:
    p = players[i]
    step = "-" if p.step is None else str(p.step)
    lines.append(
      f"{p.name:30} {step:>7} {fit.elo[i]:7.0f}  [{fit.low[i]:6.0f}, "
      f"{fit.high[i]:6.0f}]  {fit.points[i] / fit.games[i]:6.3f}  "
      f"{int(fit.games[i])}"
    )
  anchor = f"anchored at {fit.anchor} = 0" if fit.anchor else "mean 0"
  lines.append(f"(maximum-likelihood Elo, {anchor}; one virtual draw per pair)")
  return "\n".join(lines)


def as_dict(t: Tournament) -> Dict[str, object]:
  """JSON-ready."""
  return {
    "env": t.env_id,
    "games_per_pair": t.games_per_pair,
    "players": [{"name": p.name, "step": p.step, "run": p.run} for p in t.players],
    "points": t.points.tolist(),
    "games": t.games.tolist(),
    "elo": t.fit.as_dict(),
    "anchor": t.fit.anchor,
  }


def plot_elo(fit: stats.EloFit, players: List[Player], path: str, title: str) -> None:
  """PNG: Elo (with 95% intervals) against training step per run; bots as
  horizontal lines. Needs matplotlib (the `plot` extra)."""
  import matplotlib  # an optional dependency: imported only to plot

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, ax = plt.subplots(figsize=(7, 4.5))
  runs: Dict[str, List[int]] = {}
  for i, p in enumerate(players):
    if p.run is not None:
      runs.setdefault(p.run, []).append(i)
  for run, idx in runs.items():
    idx = sorted(idx, key=lambda i: players[i].step)
    x = [players[i].step for i in idx]
    y = fit.elo[idx]
    err = np.stack([y - fit.low[idx], fit.high[idx] - y])
    label = players[idx[0]].name.rsplit("@", 1)[0]
    ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
  for i, p in enumerate(players):
    if p.run is None:
      line = ax.axhline(fit.elo[i], linestyle="--", linewidth=1, color="gray")
      ax.annotate(
        p.name,
        (0.0, fit.elo[i]),
        xycoords=("axes fraction", "data"),
        xytext=(3, 3),
        textcoords="offset points",
        fontsize=8,
        color=line.get_color(),
      )
  ax.set_xlabel("training step (updates)")
  ax.set_ylabel("Elo")
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if runs:
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
