"""Evaluate a saved NDMZ agent (an Orbax checkpoint of scripts/train.py).

    python scripts/evaluate.py --checkpoint runs/nannon/checkpoints
    python scripts/evaluate.py --checkpoint runs/nannon/checkpoints --opponent optimal --games 2000
    python scripts/evaluate.py --checkpoint runs/einstein/checkpoints --opponent expectiminimax:2
    python scripts/evaluate.py --checkpoint runs/breakthrough/checkpoints --opponent mcts:200
    python scripts/evaluate.py --checkpoint runs/a/checkpoints --opponent checkpoint:runs/b/checkpoints@4000
    python scripts/evaluate.py --checkpoint runs/nannon/checkpoints --diagnostics --json eval.json

The params and config come from the checkpoint (latest step unless --step).
Any problem with it (a missing path or step, another game, a network that
does not fit the arrays, a corrupt step) is an error naming the path: there is
never a fallback to fresh weights.

All games run in parallel on the device. In two-player zero-sum games the
agent takes each seat in half of the games and the output gives win/draw/loss
rates with 95% Wilson intervals; in single-player and collaborative games
(catch, carchess) the agent plays every seat and the output gives the mean
score +- std with a 95% interval of the mean. For nannon the exact win
probabilities of the greedy network policy and of the search policy (one
search per position and roll, fixed seed) against the optimal and the random
player are added (--no-exact skips them). --diagnostics adds the NDMZ paper's
dynamics tests (anakin_mz.diagnostics) on 500 random-play games.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from typing import Dict, List, Optional

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import envs  # noqa: E402


def _params_text(env) -> str:
  return ", ".join(f"{k}={v}" for k, v in sorted(env.params.items()))


def evaluate_checkpoint(directory: str, *, step: Optional[int] = None,
                        opponent: Optional[str] = None, games: int = 1000,
                        simulations: Optional[int] = None, seed: int = 0,
                        agent_kind: str = "search", expect_env: Optional[str] = None,
                        exact: bool = True, diagnostics: bool = False,
                        diagnostic_games: int = 500) -> Dict[str, object]:
  """Restores the agent in `directory` and evaluates it (see the module doc).

  Returns a JSON-ready dict. Raises CheckpointError / ValueError with a clear
  message for any bad input.
  """
  import jax  # pylint: disable=import-outside-toplevel
  from anakin_mz import agent as agent_lib  # pylint: disable=import-outside-toplevel
  from anakin_mz import evaluation, opponents, stats  # pylint: disable=import-outside-toplevel

  if agent_kind not in ("search", "greedy"):
    raise ValueError(f"--agent must be 'search' or 'greedy', got {agent_kind!r}")
  if games < 1:
    raise ValueError(f"--games must be >= 1, got {games}")
  if simulations is not None and simulations < 1:
    raise ValueError(f"--simulations must be >= 1, got {simulations}")
  start = time.perf_counter()
  agent = agent_lib.load_agent(directory, step, expect_env=expect_env)
  env = agent.env
  search = agent.config.search
  if simulations is not None:
    search = dataclasses.replace(search, num_simulations=int(simulations))
  two_player = env.payoff == "zero_sum"
  if two_player and games % env.num_players:
    raise ValueError(f"--games must be a multiple of {env.num_players} so the "
                     f"agent plays every seat equally often, got {games}")
  if agent_kind == "search":
    policy = evaluation.search_agent_policy(agent.network, agent.params, env, search)
  else:
    policy = evaluation.greedy_network_policy(agent.network, agent.params)
  if two_player:
    opp = opponents.make_opponent(opponent or "random", env, simulations=simulations)
    opp_name = opp.name
  else:
    if opponent not in (None, "random"):  # "random" is the default: accepted
      raise ValueError(f"--opponent {opponent!r} does not apply to {env.id}: a game "
                       f"with payoff {env.payoff!r}, where the agent plays every seat")
    opp = opponents.Opponent("none", evaluation.random_policy)
    opp_name = f"none (the agent plays every seat; payoff {env.payoff})"

  key = jax.random.PRNGKey(seed)
  k_match, k_exact, k_diag = jax.random.split(key, 3)
  match = jax.jit(lambda k: evaluation.play_match(k, env, policy, opp.policy, games))
  result = jax.device_get(match(k_match))
  score = np.asarray(result["score"], np.float64)
  seats = np.asarray(result["agent_seat"])
  mean, std, lo, hi = stats.mean_interval(score)
  out: Dict[str, object] = {
      "game": env.id, "env_params": dict(env.params), "env_version": env.version,
      "checkpoint": os.path.abspath(directory), "step": agent.step,
      "agent": agent_kind,
      "simulations": search.num_simulations if agent_kind == "search" else 0,
      "opponent": opp_name, "games": games, "seed": seed,
      "score": {"mean": mean, "std": std, "low": lo, "high": hi},
      "mean_length": float(np.mean(result["length"])),
      "truncated": int(np.sum(result["truncated"])),
  }
  if two_player:
    out["wdl"] = stats.win_draw_loss(score)
    out["by_seat"] = {str(p): stats.win_draw_loss(score[seats == p])
                      for p in range(env.num_players)}
  if exact and env.id == "nannon":
    out["exact"] = nannon_exact(agent, search, k_exact)
  if diagnostics:
    from anakin_mz import diagnostics as diag  # pylint: disable=import-outside-toplevel
    report = diag.dynamics_tests(env, agent.network, agent.params, k_diag,
                                 num_games=diagnostic_games,
                                 unroll_steps=agent.config.train.unroll_steps)
    out["dynamics"] = report.as_dict()
    out["dynamics_table"] = report.table()
  out["wall_s"] = time.perf_counter() - start
  return out


def nannon_exact(agent, search, key) -> Dict[str, float]:
  """Exact win probabilities (nannon_solver) of the greedy network policy
  and of the search-policy table (one search per position and roll)."""
  from anakin_mz import nannon_eval  # pylint: disable=import-outside-toplevel
  env, net, params = agent.env, agent.network, agent.params
  out = nannon_eval.exact_scores(env, nannon_eval.greedy_table(env, net, params),
                                 prefix="greedy")
  out.update(nannon_eval.exact_scores(
      env, nannon_eval.search_table(env, net, params, search, key), prefix="search"))
  from envs import nannon_solver  # pylint: disable=import-outside-toplevel
  out["optimal_vs_random"] = nannon_solver.exact_win_probability(
      nannon_solver.solve(env).policy, "random", env).win_probability
  return out


def _interval(d) -> str:
  return f"{d['rate']:.3f}  [{d['low']:.3f}, {d['high']:.3f}]"


def format_report(r: Dict[str, object]) -> str:
  """A readable table of an `evaluate_checkpoint` result."""
  sims = f", {r['simulations']} simulations" if r["agent"] == "search" else ""
  lines: List[str] = [
      f"game        {r['game']} ({', '.join(f'{k}={v}' for k, v in sorted(r['env_params'].items()))})",
      f"checkpoint  {r['checkpoint']}  step {r['step']}",
      f"agent       {r['agent']}{sims}",
      f"opponent    {r['opponent']}",
      f"games       {r['games']}  (seed {r['seed']})",
      "",
  ]
  s = r["score"]
  if "wdl" in r:
    wdl = r["wdl"]
    lines.append(f"{'':12}{'rate':>5}  95% Wilson interval   count")
    for name in ("win", "draw", "loss"):
      lines.append(f"{name:12}{_interval(wdl[name])}   {wdl[name]['count']}")
    p = wdl["points"]
    lines.append(f"{'points':12}{p['mean']:.3f}  [{p['low']:.3f}, {p['high']:.3f}]"
                 "   (win 1, draw 1/2)")
    for seat, d in r["by_seat"].items():
      lines.append(f"as player {seat:<2} win {_interval(d['win'])} over {d['games']} games")
  lines.append(f"{'score':12}{s['mean']:+.3f} +- {s['std']:.3f} (std); mean in "
               f"[{s['low']:+.3f}, {s['high']:+.3f}] (95%)")
  lines.append(f"{'length':12}{r['mean_length']:.1f} transitions on average; "
               f"{r['truncated']} truncated")
  if "exact" in r:
    e = r["exact"]
    lines += ["", "exact win probability (nannon solver)   vs optimal   vs random",
              f"  greedy network policy                 {e['greedy_vs_optimal']:.4f}"
              f"       {e['greedy_vs_random']:.4f}",
              f"  search policy table                   {e['search_vs_optimal']:.4f}"
              f"       {e['search_vs_random']:.4f}",
              f"  (optimal player: 0.5000 vs optimal, {e['optimal_vs_random']:.4f}"
              " vs random)"]
  if "dynamics_table" in r:
    d = r["dynamics"]
    lines += ["", f"dynamics tests on {d['num_games']} random-play games, "
              f"{d['num_positions']} decision positions", r["dynamics_table"]]
  lines.append(f"\n({r['wall_s']:.1f} s)")
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--checkpoint", required=True,
                      help="checkpoint directory (<logdir>/checkpoints)")
  parser.add_argument("--step", type=int, default=None, help="saved step (default latest)")
  parser.add_argument("--env", default=None,
                      help="fail unless the checkpoint is for this game")
  parser.add_argument("--opponent", default=None,
                      help="random|optimal|expectiminimax[:depth]|mcts[:sims]|greedy|"
                           "checkpoint:DIR[@STEP] (two-player games; default random)")
  parser.add_argument("--games", type=int, default=1000)
  parser.add_argument("--simulations", type=int, default=None,
                      help="search simulations (default: the checkpoint's config)")
  parser.add_argument("--agent", default="search", choices=("search", "greedy"),
                      help="greedy search (default) or the greedy network policy")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--json", default=None, help="also write the results here")
  parser.add_argument("--diagnostics", action="store_true",
                      help="run the dynamics tests (NDMZ paper 4.3)")
  parser.add_argument("--diagnostic-games", type=int, default=500)
  parser.add_argument("--no-exact", action="store_true",
                      help="skip nannon's exact scores")
  args = parser.parse_args(argv)
  if args.env is not None and args.env not in envs.registered():
    parser.error(f"unknown env {args.env!r}; registered envs: {', '.join(envs.registered())}")
  if args.json:
    parent = os.path.dirname(os.path.abspath(args.json))
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
      parser.error(f"cannot write --json {args.json!r}: {parent!r} is not a writable directory")
  try:
    result = evaluate_checkpoint(
        args.checkpoint, step=args.step, opponent=args.opponent, games=args.games,
        simulations=args.simulations, seed=args.seed, agent_kind=args.agent,
        expect_env=args.env, exact=not args.no_exact, diagnostics=args.diagnostics,
        diagnostic_games=args.diagnostic_games)
  except ValueError as e:  # CheckpointError is a ValueError
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(format_report(result))
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump({k: v for k, v in result.items() if k != "dynamics_table"}, f, indent=1)
    print(f"wrote {args.json}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
