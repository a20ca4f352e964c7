"""Round-robin tournament among saved agents and bots, with Elo ratings
(as MooZi 5.7 rated its Breakthrough checkpoints).

    python scripts/tournament.py --all-steps runs/nannon/checkpoints --bots random,optimal
    python scripts/tournament.py --checkpoint runs/a/checkpoints@2000 \
        --checkpoint runs/b/checkpoints --bots random --games 200 --png elo.png

Every pair of players meets in `--games` games (each takes each seat in half
of them); checkpoints play the greedy search with their own search config
(`--simulations` overrides it for all). Ratings are maximum-likelihood Elo
(anakin_mz.stats.fit_elo) with 95% intervals, anchored at `--anchor` (default:
the random bot = 0 if it plays, else mean 0). The PNG plots each run's Elo
against its training step, with the bots as horizontal lines.
Two-player zero-sum games only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402


@dataclasses.dataclass
class Player:
  """A tournament entrant.

  `make(params)` builds its policy; `params` is passed to the jitted match
  as an argument, so checkpoints that share `static` (same network and search
  config) share one compiled match function.
  """
  name: str
  step: Optional[int]
  run: Optional[str]
  static: Tuple
  params: object
  make: Callable


def checkpoint_players(spec: str, env_id: Optional[str], simulations: Optional[int],
                       all_steps: bool) -> List[Player]:
  """The player(s) for `DIR[@STEP]` (every saved step with `all_steps`)."""
  from anakin_mz import agent as agent_lib  # pylint: disable=import-outside-toplevel
  from anakin_mz import checkpoint as ckpt  # pylint: disable=import-outside-toplevel
  from anakin_mz import evaluation, opponents  # pylint: disable=import-outside-toplevel
  directory, step = opponents.parse_checkpoint_spec(spec)
  if all_steps:
    if step is not None:
      raise ValueError(f"--all-steps takes a directory, not {spec!r}")
    steps = ckpt.steps(directory)
    if not steps:
      ckpt.load_metadata(directory)  # raises the precise error
  else:
    steps = (step,)
  players = []
  for s in steps:
    agent = agent_lib.load_agent(directory, s, expect_env=env_id)
    env_id = agent.env.id
    search = agent.config.search
    if simulations is not None:
      search = dataclasses.replace(search, num_simulations=simulations)
    network, env = agent.network, agent.env

    def make(params, network=network, env=env, search=search):
      return evaluation.search_agent_policy(network, params, env, search)

    static = ("ckpt", agent.config.env, agent.config.env_params,
              agent.config.network, search)
    label = os.path.basename(os.path.normpath(os.path.dirname(os.path.abspath(directory))))
    players.append(Player(name=f"{label}@{agent.step}", step=agent.step,
                          run=os.path.abspath(directory), static=static,
                          params=agent.params, make=make))
  return players


def bot_player(spec: str, env, simulations: Optional[int]) -> Player:
  from anakin_mz import opponents  # pylint: disable=import-outside-toplevel
  opp = opponents.make_opponent(spec, env, simulations=simulations)
  return Player(name=opp.name, step=None, run=None, static=("bot", opp.name),
                params=None, make=lambda params, p=opp.policy: p)


def round_robin(players: List[Player], env, games: int, seed: int,
                log: Callable[[str], None] = print) -> Tuple[np.ndarray, np.ndarray]:
  """Plays every pair; returns (points `[n, n]`, games `[n, n]`)."""
  import jax  # pylint: disable=import-outside-toplevel
  from anakin_mz import evaluation  # pylint: disable=import-outside-toplevel
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
        compiled[sig] = jax.jit(lambda k, pa, pb, a=a, b=b: evaluation.play_match(
            k, env, a.make(pa), b.make(pb), games)["score"])
      key, k = jax.random.split(key)
      t0 = time.perf_counter()
      score = np.asarray(jax.device_get(compiled[sig](k, a.params, b.params)))
      p = float(np.sum(score > 0) + 0.5 * np.sum(score == 0))
      points[i, j], points[j, i] = p, games - p
      played[i, j] = played[j, i] = games
      log(f"{a.name:>28} vs {b.name:<28} {p:6.1f} : {games - p:6.1f}  "
          f"({time.perf_counter() - t0:.1f} s)")
  return points, played


def format_table(fit, players: List[Player]) -> str:
  order = np.argsort(-fit.elo)
  lines = [f"{'player':30} {'step':>7} {'Elo':>7}  {'95% interval':>17}  "
           f"{'score':>6}  games"]
  for i in order:
    p = players[i]
    step = "-" if p.step is None else str(p.step)
    lines.append(f"{p.name:30} {step:>7} {fit.elo[i]:7.0f}  [{fit.low[i]:6.0f}, "
                 f"{fit.high[i]:6.0f}]  {fit.points[i] / fit.games[i]:6.3f}  "
                 f"{int(fit.games[i])}")
  anchor = f"anchored at {fit.anchor} = 0" if fit.anchor else "mean 0"
  lines.append(f"(maximum-likelihood Elo, {anchor}; one virtual draw per pair)")
  return "\n".join(lines)


def plot_elo(fit, players: List[Player], path: str, title: str) -> None:
  """PNG: Elo (with 95% intervals) against training step per run; bots as
  horizontal lines."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
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
    label = os.path.basename(os.path.dirname(run)) or run
    ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
  for i, p in enumerate(players):
    if p.run is None:
      line = ax.axhline(fit.elo[i], linestyle="--", linewidth=1, color="gray")
      ax.annotate(p.name, (0.0, fit.elo[i]), xycoords=("axes fraction", "data"),
                  xytext=(3, 3), textcoords="offset points", fontsize=8,
                  color=line.get_color())
  ax.set_xlabel("training step (updates)")
  ax.set_ylabel("Elo")
  ax.set_title(title)
  ax.grid(alpha=0.3)
  if runs:
    ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--checkpoint", action="append", default=[],
                      help="DIR or DIR@STEP (repeatable)")
  parser.add_argument("--all-steps", action="append", default=[],
                      help="DIR: every saved step of it plays (repeatable)")
  parser.add_argument("--bots", default="random",
                      help="comma-separated opponent specs, e.g. random,optimal,mcts:64 "
                           "('' for none)")
  parser.add_argument("--games", type=int, default=100, help="games per pair (even)")
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--anchor", default=None, help="player rated 0 (default random)")
  parser.add_argument("--env", default=None, help="fail unless the checkpoints are for this game")
  parser.add_argument("--png", default=None, help="Elo vs training step plot")
  parser.add_argument("--json", default=None)
  args = parser.parse_args(argv)
  if not args.checkpoint and not args.all_steps:
    parser.error("give at least one --checkpoint or --all-steps")
  if args.games < 2 or args.games % 2:
    parser.error(f"--games must be an even number >= 2, got {args.games}")
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  from anakin_mz import stats  # pylint: disable=import-outside-toplevel
  try:
    players: List[Player] = []
    env_id = args.env
    for spec in args.all_steps:
      players += checkpoint_players(spec, env_id, args.simulations, all_steps=True)
      env_id = env_id or players[0].static[1]
    for spec in args.checkpoint:
      players += checkpoint_players(spec, env_id, args.simulations, all_steps=False)
      env_id = env_id or players[0].static[1]
    from anakin_mz.config import Config  # pylint: disable=import-outside-toplevel,unused-import
    env_params = {p.static[2] for p in players}
    if len(env_params) != 1:
      raise ValueError(f"the checkpoints play {env_id} with different params: "
                       f"{sorted(dict(e) for e in env_params)}")
    import envs  # pylint: disable=import-outside-toplevel
    env = envs.make(env_id, **dict(players[0].static[2]))
    if env.payoff != "zero_sum" or env.num_players != 2:
      raise ValueError(f"a tournament needs a two-player zero-sum game; {env_id} "
                       f"is {env.payoff} with {env.num_players} player(s)")
    for spec in [b.strip() for b in args.bots.split(",") if b.strip()]:
      players.append(bot_player(spec, env, args.simulations))
    names = [p.name for p in players]
    if len(set(names)) != len(names):
      raise ValueError(f"a player appears twice: {names}")
    if len(players) < 2:
      raise ValueError("a tournament needs at least two players")
    anchor = args.anchor or ("random" if "random" in names else None)
    if anchor is not None and anchor not in names:
      raise ValueError(f"--anchor {anchor!r} is not a player; players: {names}")
    print(f"{env_id}: {len(players)} players, {args.games} games per pair")
    points, games = round_robin(players, env, args.games, args.seed)
    fit = stats.fit_elo(names, points, games, anchor=anchor)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print()
  print(format_table(fit, players))
  if args.png:
    plot_elo(fit, players, args.png, f"{env_id}: Elo of checkpoints ({args.games} games per pair)")
    print(f"wrote {args.png}")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({"env": env_id, "games_per_pair": args.games,
                 "players": [{"name": p.name, "step": p.step, "run": p.run}
                             for p in players],
                 "points": points.tolist(), "games": games.tolist(),
                 "elo": fit.as_dict(), "anchor": fit.anchor}, f, indent=1)
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
