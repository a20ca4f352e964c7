"""The run loop's periodic evaluation, handed to it as a callback:
`run.train(config, logdir=..., evaluate=periodic.evaluate)`, as the command
line, the experiments and `anakin_mz.train` do (`runtime.run` imports no
evaluation)."""

from __future__ import annotations

import functools
from typing import Dict

import jax

import envs
import envs.bots
from anakin_mz.core import registry
from anakin_mz.eval import dynamics, match


@functools.lru_cache(maxsize=4)
def _match_vs_random(agent, num_games: int):
  """The jitted match `(params, key) -> MatchResult` of the greedy search
  agent (`AgentSpec.search_policy`) against uniform random: params are an
  argument, so it compiles once per learner (or restored agent) and game
  count (a closure over each evaluation's params compiled it again every
  time, ~8 s of each ~13 s Nannon evaluation)."""
  env, spec = agent.env, registry.get(agent.config.agent)

  def play(params, key):
    player = spec.search_policy(agent.network, params, env, agent.config.playing_search)
    return match.play_match(env, player, envs.random_policy, key, num_games)

  return jax.jit(play)


def evaluate(agent, params, key, num_games: int) -> Dict[str, float]:
  """The run loop's evaluation of `agent` (a learner or a restored agent:
  its `config`, `env` and `network`) with `params` (`run.Evaluate`): its
  greedy player vs uniform random, all games on device; then the game's
  extra evaluators (`envs.bots.evaluators`) on its greedy network policy,
  and where its model has NDMZ's heads the NDMZ paper's dynamics tests
  (`dynamics/<metric>_k<depth>`)."""
  env, spec = agent.env, registry.get(agent.config.agent)
  result = _match_vs_random(agent, num_games)(params, key)
  out = {f"eval/vs_random_{k}": v for k, v in match.summarize(result).items()}
  greedy = {"greedy": spec.greedy(agent.network, params)}
  for evaluator in envs.bots.evaluators(env.id):
    scores = evaluator.score(env, greedy, key)
    out.update({f"{evaluator.name}/{k}": v for k, v in scores.items()})
  if spec.capabilities.dynamics_tests:
    out.update(dynamics.learner_hook(agent, params))
  return out
