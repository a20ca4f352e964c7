"""Evaluating a saved agent: matches against an opponent with intervals,
the game's extra evaluators (`envs.bots.evaluators`, e.g. Nannon's exact
scores) and, on request, the dynamics tests. `scripts/evaluate.py` is its
command line.

All games run in parallel on the device. In two-player zero-sum games the
agent takes each seat in half of the games and the result gives win/draw/loss
rates with 95% Wilson intervals; in single-player and collaborative games the
agent plays every seat and the result gives the mean score +- std with a 95%
interval of the mean.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Dict, List, Optional, Sequence, Tuple

import jax
import yaml

import envs
import envs.bots
from anakin_mz import config as config_lib
from anakin_mz.config import sections
from anakin_mz.eval import dynamics, match, opponents, planning, stats
from anakin_mz.core import players, registry
from anakin_mz.runtime import checkpoint as ckpt, export, restore


def scorable_policies(agent_kind: str) -> Tuple[str, ...]:
  """The policies the game's extra evaluators score by default in an
  `agent_kind` evaluation (`evaluate_checkpoint`'s `extra_policies=None`):
  the greedy network policy and the search, and the value player where it
  plays. Any of `EXTRA_POLICIES` may be asked for by name."""
  return ("greedy", "search") + (("value",) if agent_kind == "value" else ())


# Every policy the extra evaluators can score, whatever plays the match: the
# agent's own, and on request the planning diagnosis's players
# (`eval.planning`: a learned model taken apart).
EXTRA_POLICIES = ("greedy", "search", "value") + planning.PLANNING_POLICIES


def evaluate_checkpoint(
  directory: str,
  *,
  step: Optional[int] = None,
  opponent: Optional[str] = None,
  games: int = 1000,
  simulations: Optional[int] = None,
  seed: int = 0,
  agent_kind: Optional[str] = None,
  expect_env: Optional[str] = None,
  extra: bool = True,
  extra_policies: Optional[Sequence[str]] = None,
  diagnostics: bool = False,
  diagnostic_games: int = 500,
  search_overrides: Sequence[str] = (),
  last: Optional[int] = None,
) -> Dict[str, object]:
  """Restores the agent in `directory` (latest step unless `step`) and
  evaluates it (see the module doc); with `last`, each of the `last` newest
  saved steps instead, pooled (`evaluate_last_checkpoints`). `agent_kind` is the player (None: the
  agent's default, a model file's `agent_kind`, else "search").
  `search_overrides` ("key=value", keys of the config's `search` section)
  change its search for this evaluation;
  `simulations` is one of them, applied last. `extra` runs the game's extra
  evaluators on the greedy network policy and the search policy (one search
  per position, fixed key), and on the value player with
  `agent_kind="value"`. `extra_policies` names a subset of those ("greedy",
  "search", "value") for them to score (None: all): Nannon 12-5-6's exact
  search table costs a search for each of its 10.6M decision states
  (about 20 minutes on one core at 16 simulations).

  Returns a JSON-ready dict. Raises CheckpointError / ValueError with a clear
  message for any bad input.
  """
  if last is not None:
    return evaluate_last_checkpoints(
      directory,
      last,
      step=step,
      opponent=opponent,
      games=games,
      simulations=simulations,
      seed=seed,
      agent_kind=agent_kind,
      expect_env=expect_env,
      extra=extra,
      extra_policies=extra_policies,
      diagnostics=diagnostics,
      diagnostic_games=diagnostic_games,
      search_overrides=search_overrides,
    )
  if agent_kind is not None and agent_kind not in players.PLAYERS:
    raise ValueError(f"--player must be one of {players.PLAYERS}, got {agent_kind!r}")
  if games < 1:
    raise ValueError(f"--games must be >= 1, got {games}")
  if simulations is not None and simulations < 1:
    raise ValueError(f"--simulations must be >= 1, got {simulations}")
  if extra_policies is not None:
    unknown = [n for n in extra_policies if n not in EXTRA_POLICIES]
    if unknown or not extra_policies:
      raise ValueError(
        f"--extra-policies {','.join(extra_policies)!r}: the extra evaluators "
        f"score a non-empty subset of {', '.join(EXTRA_POLICIES)}"
      )
  start = time.perf_counter()
  agent = restore.load_agent(directory, step, expect_env=expect_env)
  if extra_policies is not None and not envs.bots.evaluators(agent.env.id):
    # Named policies are scored by the game's extra evaluators only: with none,
    # the request would be dropped without a word.
    raise ValueError(
      f"--extra-policies {','.join(extra_policies)!r}: {agent.env.id} has no extra evaluator "
      "to score them (Nannon's exact tables are one); --player picks who plays the match"
    )
  agent_kind = agent.agent_kind if agent_kind is None else agent_kind
  if diagnostics and not agent.spec.capabilities.dynamics_tests:
    raise ValueError(
      f"--diagnostics tests a learned model; this checkpoint's agent "
      f"{agent.config.agent!r} has no NDMZ model, whose identity and chance heads they test "
      "(only ndmz checkpoints have one)"
    )
  env = agent.env
  search = with_search_overrides(agent.config, search_overrides).playing_search
  if simulations is not None:
    search = dataclasses.replace(search, num_simulations=int(simulations))
  policies = {"greedy": agent.greedy_policy(), "search": agent.search_policy(search)}
  if agent_kind == "value" or "value" in (extra_policies or ()):
    policies["value"] = agent.value_policy(search)  # only on request: one more table to score
  wanted = [n for n in (extra_policies or ()) if n in planning.PLANNING_POLICIES]
  policies.update(planning.planning_policies(agent, search, wanted))
  policy = policies[agent_kind]
  key = jax.random.PRNGKey(seed)
  k_match, k_extra, k_diag = jax.random.split(key, 3)
  model_search = agent_kind == "search" and not agent.spec.plays
  model_expectimax = model_search and search.root == "expectimax"
  tree = model_search and not model_expectimax
  out: Dict[str, object] = {
    "game": env.id,
    "env_params": dict(env.params),
    "env_version": env.version,
    "checkpoint": os.path.abspath(agent.directory),  # a shipped model: its file
    "step": agent.step,
    "agent": agent_kind,
    "algorithm": agent.config.agent,  # the config's agent (registered): whose policy plays
    # 0 where no tree of num_simulations plays (the value policy, agents
    # whose `plays` says how they play instead: TD(lambda), PPO, and the
    # full-width expectimax on the model, `search.root=expectimax`).
    "simulations": search.num_simulations if tree else 0,
  }
  if agent_kind == "value" or (agent_kind == "search" and "{depth}" in agent.spec.plays):
    out["expectimax_depth"] = search.expectimax_depth
  if model_expectimax:
    out["expectimax_depth"] = search.expectimax_depth
    out["search_root"] = "expectimax"
  if search_overrides:
    out["search_overrides"] = list(search_overrides)
  out.update(_match(env, policy, opponent, games, seed, k_match, simulations))
  if extra:
    scored = {n: p for n, p in policies.items() if extra_policies is None or n in extra_policies}
    for evaluator in envs.bots.evaluators(env.id):
      values = evaluator.score(env, scored, k_extra)
      values.update(evaluator.reference(env))
      out[evaluator.name] = values
  if diagnostics:
    report = dynamics.dynamics_tests(
      env,
      agent.network,
      agent.params,
      k_diag,
      num_games=diagnostic_games,
      unroll_steps=agent.config.train.unroll_steps,
    )
    out["dynamics"] = report.as_dict()
    out["dynamics_table"] = report.table()
  out["wall_s"] = time.perf_counter() - start
  return out


def evaluate_last_checkpoints(directory: str, last: int, **kwargs) -> Dict[str, object]:
  """`evaluate_checkpoint` on each of the `last` newest saved steps of
  `directory` (the same games, seed and settings, `kwargs`), pooled: one
  checkpoint's score moves by more than its interval between neighbouring
  checkpoints (Space Invaders: +-25 over the last 200k env steps against
  +-4 over 128 games), so an average over the last few is the steadier
  figure of a run's end.

  Returns the newest step's result with the match figures of all
  `last` x `games` games put together (`score`, `wdl`, `by_seat`: what each
  would be over the games pooled; `games` their total, `mean_length` their
  mean, `truncated` their sum), the numbers of the game's extra evaluators
  averaged over the checkpoints, and `checkpoints`: each step's own
  `{step, score, wdl?}`.

  Raises:
    CheckpointError / ValueError: as `evaluate_checkpoint`; `last` < 1, a
      `step` or `diagnostics` among `kwargs`, a model file, or fewer saved
      steps than `last` (naming them).
  """
  if last < 1:
    raise ValueError(f"--last-checkpoints must be >= 1, got {last}")
  if kwargs.get("step") is not None:
    raise ValueError("--last-checkpoints picks the steps; it cannot go with --step")
  kwargs.pop("step", None)
  if kwargs.get("diagnostics"):  # one model's tests: evaluate_checkpoint at a step
    raise ValueError("--diagnostics tests one checkpoint's model; not with --last-checkpoints")
  if export.resolve(directory) is not None:
    raise ValueError(
      f"{directory!r} is a model file (one step); --last-checkpoints needs a checkpoint directory"
    )
  saved = ckpt.steps(directory)
  if len(saved) < last:
    have = ", ".join(map(str, saved)) or "none"
    raise ValueError(
      f"--last-checkpoints {last}: {directory!r} holds {len(saved)} saved step(s) ({have})"
    )
  results = [evaluate_checkpoint(directory, step=s, **kwargs) for s in saved[-last:]]
  return pool_results(results)


def pool_results(results: Sequence[Dict[str, object]]) -> Dict[str, object]:
  """Several `evaluate_checkpoint` results of one match setting (games,
  seed, opponent) as one (`evaluate_last_checkpoints`)."""
  out = dict(results[-1])
  out.pop("dynamics", None)
  out.pop("dynamics_table", None)
  n = [int(r["games"]) for r in results]
  mean, std, lo, hi = stats.pooled_mean_interval(
    [(r["score"]["mean"], r["score"]["std"], g) for r, g in zip(results, n)]
  )
  out["score"] = {"mean": mean, "std": std, "low": lo, "high": hi}
  out["games"] = sum(n)
  out["mean_length"] = sum(r["mean_length"] * g for r, g in zip(results, n)) / sum(n)
  out["truncated"] = sum(int(r["truncated"]) for r in results)
  if "wdl" in out:
    out["wdl"] = stats.pooled_win_draw_loss([r["wdl"] for r in results])
    out["by_seat"] = {
      seat: stats.pooled_win_draw_loss([r["by_seat"][seat] for r in results])
      for seat in out["by_seat"]
    }
  for evaluator in envs.bots.evaluators(str(out["game"])):
    if evaluator.name in out:
      out[evaluator.name] = _mean_numbers([r[evaluator.name] for r in results])
  out["checkpoints"] = [
    {"step": r["step"], "score": r["score"], **({"wdl": r["wdl"]} if "wdl" in r else {})}
    for r in results
  ]
  out["wall_s"] = sum(float(r["wall_s"]) for r in results)
  return out


def _mean_numbers(values: Sequence[object]) -> object:
  """The mean of numbers, leaf by leaf through equal dicts; other leaves
  (text) as the last value's."""
  last = values[-1]
  if isinstance(last, dict):
    return {k: _mean_numbers([v[k] for v in values]) for k in last}
  if isinstance(last, (int, float)) and not isinstance(last, bool):
    return sum(float(v) for v in values) / len(values)
  return last


def with_search_overrides(config: config_lib.Config, overrides: Sequence[str]) -> config_lib.Config:
  """`config` with `search.KEY=VALUE` overrides applied and checked, as
  keys of the playing search (`play_search`): the override is what plays,
  and the search self-play trained with (`search`) stays as it was (so a
  play-time search such as `root=expectimax` can be tried on any
  checkpoint). Checked first as keys of the search section, so a bad one
  is named as `--search` spells it.

  Raises:
    ValueError: a malformed item, an unknown key or a bad value (the
      config's own message, which lists the valid keys).
  """
  if not overrides:
    return config
  for item in overrides:
    if "=" not in item or "." in item.split("=", 1)[0]:
      raise ValueError(f"--search {item!r}: expected KEY=VALUE with a key of the search section")
  nested = config_lib.parse_overrides([f"search.{item}" for item in overrides])
  raw = config.to_dict()
  play = {**raw.get("play_search", {}), **nested["search"]}  # type: ignore[dict-item]
  sections.build_section(type(config.search), {**raw["search"], **play}, "search")
  raw["play_search"] = play
  return config_lib.from_dict(raw)


def evaluate_bot(
  env: envs.Env,
  bot: str,
  *,
  opponent: Optional[str] = None,
  games: int = 1000,
  seed: int = 0,
  simulations: Optional[int] = None,
) -> Dict[str, object]:
  """The game's bot `bot` (e.g. "expectiminimax:2") against `opponent`, in
  the same match and with the same result as `evaluate_checkpoint`."""
  if games < 1:
    raise ValueError(f"--games must be >= 1, got {games}")
  start = time.perf_counter()
  name, policy = envs.bots.make_bot(bot, env)
  out: Dict[str, object] = {
    "game": env.id,
    "env_params": dict(env.params),
    "env_version": env.version,
    "agent": name,
    "simulations": 0,
  }
  k_match = jax.random.split(jax.random.PRNGKey(seed), 3)[0]
  out.update(_match(env, policy, opponent, games, seed, k_match, simulations))
  out["wall_s"] = time.perf_counter() - start
  return out


def parse_params(items: Sequence[str]) -> Dict[str, object]:
  """`["rows=6", "placement=random"]` -> {"rows": 6, "placement": "random"}
  (values are YAML scalars; `envs.make` checks names and types)."""
  out: Dict[str, object] = {}
  for item in items:
    key, sep, text = item.partition("=")
    if not sep or not key:
      raise ValueError(f"--param {item!r} is not of the form KEY=VALUE")
    out[key] = yaml.safe_load(text)
  return out


def _match(
  env: envs.Env,
  policy: envs.Policy,
  opponent: Optional[str],
  games: int,
  seed: int,
  key,
  simulations: Optional[int],
) -> Dict[str, object]:
  """`policy` against the opponent spec (default random) in a two-player
  zero-sum game (each seat in half of the games), or alone in every seat."""
  if env.payoff == "zero_sum":
    if games % env.num_players:
      raise ValueError(
        f"--games must be a multiple of {env.num_players} so the "
        f"agent plays every seat equally often, got {games}"
      )
    opp = opponents.make_opponent(opponent or "random", env, simulations=simulations)
    opp_name = opp.name
  else:
    if opponent not in (None, "random"):  # "random" is the default: accepted
      raise ValueError(
        f"--opponent {opponent!r} does not apply to {env.id}: a game "
        f"with payoff {env.payoff!r}, where the agent plays every seat"
      )
    opp = opponents.Opponent("none", envs.random_policy)
    opp_name = f"none (the agent plays every seat; payoff {env.payoff})"
  result = jax.jit(lambda k: match.play_match(env, policy, opp.policy, k, games))(key)
  out: Dict[str, object] = {"opponent": opp_name, "games": games, "seed": seed}
  out.update(match.match_stats(result, env))
  return out


def _interval(d) -> str:
  return f"{d['rate']:.3f}  [{d['low']:.3f}, {d['high']:.3f}]"


def format_report(r: Dict[str, object]) -> str:
  """A readable table of an `evaluate_checkpoint` result."""
  sims = f", {r['simulations']} simulations" if r["agent"] == "search" else ""
  plays = registry.get(r["algorithm"]).plays if "algorithm" in r else ""
  depth = r.get("expectimax_depth", 1)  # records older than the setting: 1-ply
  if r["agent"] == "value":  # no tree: AgentSpec.value_policy
    sims = f", {depth}-ply expectimax"
  elif r.get("search_root") == "expectimax":  # no tree: search.root=expectimax
    sims = f", {depth}-move expectimax on the model"
  elif plays:  # an agent whose players grow no tree (TD(lambda): expectimax)
    sims = ", " + plays.format(depth=depth)
  algorithm = f"{r['algorithm']} " if "algorithm" in r else ""
  params = ", ".join(f"{k}={v}" for k, v in sorted(r["env_params"].items()))
  where, games = [], f"games       {r['games']}  (seed {r['seed']})"
  pooled = r.get("checkpoints", [])  # evaluate_last_checkpoints: the games of these steps
  if pooled:
    steps = ", ".join(str(c["step"]) for c in pooled)
    where = [f"checkpoint  {r['checkpoint']}  steps {steps}"]
    each = r["games"] // len(pooled)
    games = f"games       {r['games']}: {each} at each step, pooled  (seed {r['seed']})"
  elif "checkpoint" in r:
    where = [f"checkpoint  {r['checkpoint']}  step {r['step']}"]
  lines: List[str] = [
    f"game        {r['game']} ({params})",
    *where,
    f"agent       {algorithm}{r['agent']}{sims}",
    f"opponent    {r['opponent']}",
    games,
  ]
  for c in pooled:
    c_s = c["score"]
    lines.append(
      f"step {c['step']:<7}score {c_s['mean']:+.3f} in [{c_s['low']:+.3f}, {c_s['high']:+.3f}]"
    )
  lines.append("")
  s = r["score"]
  if "wdl" in r:
    wdl = r["wdl"]
    lines.append(f"{'':12}{'rate':>5}  95% Wilson interval   count")
    for name in ("win", "draw", "loss"):
      lines.append(f"{name:12}{_interval(wdl[name])}   {wdl[name]['count']}")
    p = wdl["points"]
    lines.append(
      f"{'points':12}{p['mean']:.3f}  [{p['low']:.3f}, {p['high']:.3f}]   (win 1, draw 1/2)"
    )
    for seat, d in r["by_seat"].items():
      lines.append(f"as player {seat:<2} win {_interval(d['win'])} over {d['games']} games")
  lines.append(
    f"{'score':12}{s['mean']:+.3f} +- {s['std']:.3f} (std); mean in "
    f"[{s['low']:+.3f}, {s['high']:+.3f}] (95%)"
  )
  lines.append(
    f"{'length':12}{r['mean_length']:.1f} transitions on average; {r['truncated']} truncated"
  )
  for evaluator in envs.bots.evaluators(r["game"]):
    if evaluator.name in r:
      lines += ["", evaluator.format(r[evaluator.name])]
  if "dynamics_table" in r:
    d = r["dynamics"]
    lines += [
      "",
      f"dynamics tests on {d['num_games']} random-play games, "
      f"{d['num_positions']} decision positions",
      r["dynamics_table"],
    ]
  lines.append(f"\n({r['wall_s']:.1f} s)")
  return "\n".join(lines)
