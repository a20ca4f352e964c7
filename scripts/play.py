"""Play against a saved NDMZ agent in the terminal.

    python scripts/play.py --env nannon --checkpoint runs/nannon/checkpoints
    python scripts/play.py --env einstein --checkpoint runs/einstein/checkpoints --seat 1

You take seat `--seat` (in single-player and collaborative games you play
seat 0 and the agent plays the others). Before each of your moves you see the
board (with the dice), your legal moves and the agent's value estimate of the
position; on its turns the agent searches and shows its move and value.
Chance (dice) is drawn from the game's probabilities and printed. Type the
number of a move; bad input asks again. 'h' lists the moves again, 'q' quits.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import envs  # noqa: E402


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


def play(agent, seat: int, seed: int, simulations, kind: str,
         read: Callable[[str], str] = input) -> int:
  """One game in the terminal; returns 0."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  from anakin_mz.selfplay import eval_search_config, search_policy  # pylint: disable=import-outside-toplevel
  env, network, params = agent.env, agent.network, agent.params
  config = eval_search_config(agent.config.search)
  if simulations is not None:
    config = dataclasses.replace(config, num_simulations=simulations)
  zero_sum = env.payoff == "zero_sum"

  @jax.jit
  def think(key, state):
    batched = jax.tree.map(lambda x: x[None], state)
    value = network.root(params, batched.observation).value[0]
    if kind == "greedy":
      logits = network.root(params, batched.observation).policy_logits[0]
      action = jnp.argmax(jnp.where(state.legal_action_mask, logits, -jnp.inf))
      return action, value, value
    out = search_policy(params, key, batched, network=network, env=env,
                        config=config, temperature=0.0)
    return out.action[0], out.root_value[0], value

  step = jax.jit(env.step)
  key = jax.random.PRNGKey(seed)
  key, k0 = jax.random.split(key)
  state = jax.jit(env.init)(k0)
  total = [0.0] * env.num_players
  print(f"{env.id}: you are player {seat}; the agent (step {agent.step}, "
        f"{kind}{'' if kind == 'greedy' else f', {config.num_simulations} simulations'}) "
        f"plays {'player ' + str(1 - seat) if zero_sum and env.num_players == 2 else 'the other seats'}.")
  while not bool(state.done):
    key, k_think, k_chance = jax.random.split(key, 3)
    player = int(state.current_player)
    if player == envs.CHANCE:
      probs = jax.device_get(state.chance_probs)
      c = int(jax.random.categorical(k_chance, jnp.log(jnp.maximum(state.chance_probs, 1e-30))))
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
        print(f"agent's value estimate: {agent_view:+.3f} for itself "
              f"({float(net_value):+.3f} for you)")
        print("your moves: " + "; ".join(f"{a}: {names[a]}" for a in legal))
        action = _ask(f"player {seat}, your move> ", read, legal, names)
      else:
        action = int(move)
        print(f"agent (player {player}) plays {action}: {names.get(action, action)}   "
              f"value {float(search_value):+.3f} (search), {float(net_value):+.3f} (network)")
    state = step(state, jnp.int32(action))
    rewards = jax.device_get(state.rewards)
    total = [t + float(r) for t, r in zip(total, rewards)]
  print()
  print(env.render(state))
  mine = total[seat]
  outcome = ("you win" if mine > 0 else "you lose" if mine < 0 else "draw") if zero_sum \
      else f"score {mine:+.2f}"
  print(f"game over: {outcome} (returns {', '.join(f'{t:+.2f}' for t in total)})")
  return 0


def main(argv=None, read: Callable[[str], str] = input) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--env", required=True, help=f"one of {', '.join(envs.registered())}")
  parser.add_argument("--checkpoint", required=True)
  parser.add_argument("--step", type=int, default=None)
  parser.add_argument("--seat", type=int, default=0)
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument("--agent", default="search", choices=("search", "greedy"))
  parser.add_argument("--seed", type=int, default=0)
  args = parser.parse_args(argv)
  if args.env not in envs.registered():
    parser.error(f"unknown env {args.env!r}; registered envs: {', '.join(envs.registered())}")
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  from anakin_mz import agent as agent_lib  # pylint: disable=import-outside-toplevel
  try:
    agent = agent_lib.load_agent(args.checkpoint, args.step, expect_env=args.env)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if not 0 <= args.seat < agent.env.num_players:
    parser.error(f"--seat must be in 0..{agent.env.num_players - 1}")
  try:
    return play(agent, args.seat, args.seed, args.simulations, args.agent, read)
  except (EOFError, KeyboardInterrupt):
    print("\nbye")
    return 0


if __name__ == "__main__":
  sys.exit(main())
