"""Playing against a saved agent in the terminal: `scripts/play.py` is its
command line. The agent acts through its registration (`core.registry`);
chance is drawn with `envs.chance_outcome`.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import jax
import jax.numpy as jnp

import envs
from anakin_mz.core import act
from anakin_mz.runtime import restore


def _ask(prompt: str, read: Callable[[str], str], legal, names) -> int:
  """Reads a legal move number; re-prompts on bad input. Raises EOFError,
  KeyboardInterrupt, or SystemExit on 'q'."""
  while True:
    text = read(prompt).strip().lower()
    if text in ("q", "quit", "exit"):
      raise SystemExit(0)
    if text in ("h", "help", "?", ""):
      print("moves: " + "; ".join(f"{a}: {names[a]}" for a in legal))
      continue
    try:
      a = int(text)
    except ValueError:
      print(f"'{text}' is not a move number; legal moves: {legal} ('h' lists them)")
      continue
    if a not in legal:
      print(f"{a} is not a legal move now; legal moves: {legal}")
      continue
    return a


def play(
  agent: restore.Agent,
  seat: int,
  seed: int,
  simulations: Optional[int],
  kind: str,
  read: Callable[[str], str] = input,
) -> int:
  """One game in the terminal; returns 0."""
  env, network, params, spec = agent.env, agent.network, agent.params, agent.spec
  config = act.eval_search_config(agent.config.playing_search)
  if simulations is not None:
    config = dataclasses.replace(config, num_simulations=simulations)
  zero_sum = env.payoff == "zero_sum"
  greedy = spec.greedy(network, params)

  @jax.jit
  def think(key, state):
    batched = jax.tree.map(lambda x: x[None], state)
    value = spec.value(network, params)(batched.observation)[0]
    if kind == "greedy" or spec.search is None:
      return greedy(batched, key)[0], value, value
    out = spec.search(params, batched, key, model=network, env=env, config=config, temperature=0.0)
    return out.action[0], out.root_value[0], value

  step = jax.jit(env.step)
  key = jax.random.PRNGKey(seed)
  key, k0 = jax.random.split(key)
  state = jax.jit(env.init)(k0)
  total = [0.0] * env.num_players
  sims = "" if kind == "greedy" else f", {config.num_simulations} simulations"
  others = f"player {1 - seat}" if zero_sum and env.num_players == 2 else "the other seats"
  print(
    f"{env.id}: you are player {seat}; the agent (step {agent.step}, {kind}{sims}) plays {others}."
  )
  while not bool(state.done):
    key, k_think, k_chance = jax.random.split(key, 3)
    player = int(state.current_player)
    if player == envs.CHANCE:
      probs = jax.device_get(state.chance_probs)
      c = int(envs.chance_outcome(state, k_chance))
      print(f"chance: outcome {c} (probability {probs[c]:.3f})")
      action = c
    else:
      print()
      print(env.render(state))
      legal = [int(a) for a in jax.device_get(jnp.nonzero(state.legal_action_mask)[0])]
      names = {a: env.game.action_to_string(state.game, a) for a in legal}
      move, search_value, net_value = jax.device_get(think(k_think, state))
      if player == seat:
        # The network's values are the mover's; the agent is the other side.
        agent_view = -float(net_value) if zero_sum else float(net_value)
        print(
          f"agent's value estimate: {agent_view:+.3f} for itself ({float(net_value):+.3f} for you)"
        )
        print("your moves: " + "; ".join(f"{a}: {names[a]}" for a in legal))
        action = _ask(f"player {seat}, your move> ", read, legal, names)
      else:
        action = int(move)
        print(
          f"agent (player {player}) plays {action}: {names.get(action, action)}   "
          f"value {float(search_value):+.3f} (search), {float(net_value):+.3f} (network)"
        )
    state = step(state, jnp.int32(action))
    rewards = jax.device_get(state.rewards)
    total = [t + float(r) for t, r in zip(total, rewards)]
  print()
  print(env.render(state))
  mine = total[seat]
  outcome = (
    ("you win" if mine > 0 else "you lose" if mine < 0 else "draw")
    if zero_sum
    else f"score {mine:+.2f}"
  )
  print(f"game over: {outcome} (returns {', '.join(f'{t:+.2f}' for t in total)})")
  return 0
