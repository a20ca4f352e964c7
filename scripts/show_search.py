"""Draw one NDMZ search tree, as text and as SVG (in the spirit of MooZi's
Figure 5.9).

    python scripts/show_search.py --checkpoint runs/nannon/checkpoints
    python scripts/show_search.py --checkpoint runs/nannon/checkpoints --moves 6 --seed 3 \
        --simulations 50 --svg tree.svg

The position is reached from a new game by `--moves` uniformly random
transitions (chance outcomes drawn from the game's probabilities), then on to
the next decision node. One search (no root noise, as in evaluation) runs
there; every node of its tree is printed with

* its kind as the search decided it from the identity head (choice node of
  player P, chance node, terminal node) - the *predicted identity*,
* the prior of the edge into it (choice policy or chance policy of the parent),
* visits N, Q of the edge (reward + value, seen from the parent's mover), the
  predicted reward r of the edge and the node's value V (root mover's view),
* the true game state reached by the same actions (MooZi's overlay): its
  kind, or "delusion" when the action was illegal there or the model's node
  kind is wrong (a choice node where the game is at chance, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Dict, List, Optional
from xml.sax.saxutils import escape

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

KIND_NAMES = {0: "choice", 1: "chance", 2: "terminal"}


@dataclasses.dataclass
class Node:
  """One node of the drawn tree."""
  index: int
  parent: int
  depth: int
  edge: str            # the action into it ("" at the root)
  kind: str            # predicted: "choice P1", "chance", "terminal"
  prior: float
  visits: int
  q: float             # Q of the edge, from the parent's mover (nan at root)
  reward: float        # predicted reward of the edge (root mover's view)
  value: float         # node value (root mover's view)
  real: str            # true state: "decision P1", "chance", "terminal", "delusion"
  children: List[int] = dataclasses.field(default_factory=list)


def position(env, seed: int, moves: int):
  """The decision state after `moves` random transitions from a new game."""
  import jax  # pylint: disable=import-outside-toplevel
  import jax.numpy as jnp  # pylint: disable=import-outside-toplevel
  import envs  # pylint: disable=import-outside-toplevel
  key = jax.random.PRNGKey(seed)
  key, k0 = jax.random.split(key)
  step = jax.jit(env.step)
  state = jax.jit(env.init)(k0)
  done = 0
  while True:
    if bool(state.done):
      raise ValueError(f"the game ended after {done} random transitions; "
                       f"use fewer --moves than {moves}")
    if done >= moves and int(state.current_player) >= 0:
      return state
    key, k = jax.random.split(key)
    if int(state.current_player) == envs.CHANCE:
      a = jax.random.categorical(k, jnp.log(jnp.maximum(state.chance_probs, 1e-30)))
    else:
      a = jax.random.categorical(k, jnp.where(state.legal_action_mask, 0.0, -jnp.inf))
    state = step(state, a)
    done += 1


def build_tree(env, state, out, root_player: int) -> Dict[int, Node]:
  """The expanded nodes of search output `out` (batch of 1) with the true
  game states overlaid."""
  import jax  # pylint: disable=import-outside-toplevel
  import envs  # pylint: disable=import-outside-toplevel
  tree = jax.device_get(out.search_tree)
  kinds = np.asarray(tree.embeddings.kind)[0]
  players = np.asarray(tree.embeddings.player)[0]
  visits = np.asarray(tree.node_visits)[0]
  values = np.asarray(tree.node_values)[0]
  child = np.asarray(tree.children_index)[0]
  logits = np.asarray(tree.children_prior_logits)[0]
  rewards = np.asarray(tree.children_rewards)[0]
  cvalues = np.asarray(tree.children_values)[0]
  num_players = env.num_players
  step = jax.jit(env.step)
  zero_sum = env.payoff == "zero_sum"

  def kind_text(n):
    if kinds[n] == 0:
      return f"choice P{(root_player + int(players[n])) % num_players}"
    return KIND_NAMES[int(kinds[n])]

  def real_text(s):
    if s is None:
      return "delusion"
    p = int(s.current_player)
    return f"decision P{p}" if p >= 0 else ("chance" if p == envs.CHANCE else "terminal")

  nodes = {0: Node(0, -1, 0, "", kind_text(0) + " (root)", 1.0, int(visits[0]),
                   float("nan"), 0.0, float(values[0]), real_text(state))}
  real = {0: state}
  todo = [0]
  while todo:
    n = todo.pop(0)
    z = logits[n] - logits[n].max()
    prior = np.exp(z) / np.exp(z).sum()
    sign = -1.0 if zero_sum and kinds[n] == 0 and players[n] != 0 else 1.0
    for slot in np.argsort(-visits[np.maximum(child[n], 0)] * (child[n] >= 0)):
      c = int(child[n, slot])
      if c < 0:
        continue
      s = real[n]
      nxt = None
      if kinds[n] == 0:
        edge = f"a{slot}"
        if s is not None and int(s.current_player) >= 0 and slot < env.num_actions:
          edge = f"a{slot} {env.game.action_to_string(s.game, int(slot))}"
          if bool(s.legal_action_mask[slot]):
            nxt = step(s, np.int32(slot))
      elif kinds[n] == 1:
        edge = f"chance {slot}"
        if (s is not None and int(s.current_player) == envs.CHANCE
            and slot < env.num_chance_outcomes and float(s.chance_probs[slot]) > 0):
          edge = f"chance {slot} (true p={float(s.chance_probs[slot]):.2f})"
          nxt = step(s, np.int32(slot))
      else:
        edge = "(past terminal)"
      real[c] = nxt
      q = sign * float(rewards[n, slot] + cvalues[n, slot])
      nodes[c] = Node(c, n, nodes[n].depth + 1, edge, kind_text(c), float(prior[slot]),
                      int(visits[c]), q, float(rewards[n, slot]), float(values[c]),
                      real_text(nxt))
      nodes[n].children.append(c)
      todo.append(c)
  # A predicted node whose kind disagrees with the true state is a delusion.
  for n, node in nodes.items():
    if n and node.real != "delusion":
      predicted = node.kind.split()[0]
      actual = node.real.split()[0]
      if {"choice": "decision"}.get(predicted, predicted) != actual or (
          predicted == "choice" and node.kind.split()[1] != node.real.split()[1]):
        node.real += " (kind mispredicted)"
  return nodes


def text_tree(nodes: Dict[int, Node], max_depth: Optional[int] = None) -> str:
  """The tree as indented text."""
  lines = []

  def walk(n, prefix, last):
    node = nodes[n]
    if node.parent < 0:
      head = (f"[{n}] {node.kind}  N={node.visits}  V={node.value:+.3f}  "
              f"real: {node.real}")
      lines.append(head)
    else:
      branch = "`- " if last else "|- "
      lines.append(f"{prefix}{branch}{node.edge}  p={node.prior:.2f} N={node.visits} "
                   f"Q={node.q:+.3f} r={node.reward:+.3f} -> [{n}] {node.kind} "
                   f"V={node.value:+.3f}  real: {node.real}")
      prefix += "   " if last else "|  "
    if max_depth is not None and node.depth >= max_depth:
      if node.children:
        lines.append(f"{prefix}   ... {len(node.children)} children")
      return
    for i, c in enumerate(node.children):
      walk(c, prefix, i == len(node.children) - 1)

  walk(0, "", True)
  return "\n".join(lines)


COLORS = {"choice0": "#cfe2ff", "choice1": "#f8d7da", "chance": "#fff3cd",
          "terminal": "#d3d3d3", "delusion": "#ffe4ec"}


def svg_tree(nodes: Dict[int, Node], root_player: int, title: str,
             max_depth: Optional[int] = None) -> str:
  """The tree as an SVG document: leaves spread left to right, each parent
  centred over its children."""
  shown = {n for n, v in nodes.items() if max_depth is None or v.depth <= max_depth}
  xs: Dict[int, float] = {}
  counter = [0]

  def place(n):
    kids = [c for c in nodes[n].children if c in shown]
    if not kids:
      xs[n] = counter[0]
      counter[0] += 1
    else:
      for c in kids:
        place(c)
      xs[n] = (xs[kids[0]] + xs[kids[-1]]) / 2
  place(0)
  box_w, box_h, gap_x, gap_y = 150, 58, 14, 70
  depth = max(nodes[n].depth for n in shown)
  width = int(counter[0] * (box_w + gap_x) + 40)
  height = int((depth + 1) * (box_h + gap_y) + 60)
  pos = {n: (20 + xs[n] * (box_w + gap_x), 50 + nodes[n].depth * (box_h + gap_y))
         for n in shown}
  parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="monospace" font-size="10">',
           f'<text x="20" y="24" font-size="13">{escape(title)}</text>']
  for n in shown:
    node = nodes[n]
    if node.parent < 0 or node.parent not in shown:
      continue
    x0, y0 = pos[node.parent]
    x1, y1 = pos[n]
    parts.append(f'<line x1="{x0 + box_w / 2}" y1="{y0 + box_h}" x2="{x1 + box_w / 2}" '
                 f'y2="{y1}" stroke="#888" stroke-width="{1 + np.log1p(node.visits):.1f}"/>')
    label = f"{node.edge[:22]} p={node.prior:.2f} Q={node.q:+.2f}"
    parts.append(f'<text x="{x1 + box_w / 2}" y="{y1 - 6}" text-anchor="middle" '
                 f'fill="#444">{escape(label)}</text>')
  for n in shown:
    node = nodes[n]
    x, y = pos[n]
    if node.real.startswith("delusion"):
      color = COLORS["delusion"]
    elif node.kind.startswith("choice"):
      color = COLORS["choice0" if node.kind.split()[1] == f"P{root_player}" else "choice1"]
    else:
      color = COLORS.get(node.kind.split()[0], "#ffffff")
    border = "#c00" if "delusion" in node.real or "mispredicted" in node.real else "#333"
    parts.append(f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="5" '
                 f'fill="{color}" stroke="{border}"/>')
    rows = [f"#{n} {node.kind}", f"N={node.visits} V={node.value:+.3f}",
            f"r={node.reward:+.3f}", f"real: {node.real}"[:26]]
    for i, row in enumerate(rows):
      parts.append(f'<text x="{x + 5}" y="{y + 13 + 13 * i}">{escape(row)}</text>')
  parts.append("</svg>")
  return "\n".join(parts)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(
      description=__doc__.split("\n")[0],
      formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument("--checkpoint", required=True)
  parser.add_argument("--step", type=int, default=None)
  parser.add_argument("--moves", type=int, default=0,
                      help="random transitions before the searched position")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--simulations", type=int, default=None)
  parser.add_argument("--depth", type=int, default=None, help="draw this many levels")
  parser.add_argument("--svg", default="search_tree.svg", help="SVG output path")
  args = parser.parse_args(argv)
  if args.moves < 0:
    parser.error("--moves must be >= 0")
  if args.simulations is not None and args.simulations < 1:
    parser.error("--simulations must be >= 1")
  try:
    import jax  # pylint: disable=import-outside-toplevel
    from anakin_mz import agent as agent_lib  # pylint: disable=import-outside-toplevel
    from anakin_mz.selfplay import eval_search_config, search_policy  # pylint: disable=import-outside-toplevel
    agent = agent_lib.load_agent(args.checkpoint, args.step)
    env = agent.env
    config = eval_search_config(agent.config.search)
    if args.simulations is not None:
      config = dataclasses.replace(config, num_simulations=args.simulations)
    state = position(env, args.seed, args.moves)
    batched = jax.tree.map(lambda x: x[None], state)
    out = search_policy(agent.params, jax.random.PRNGKey(args.seed), batched,
                        network=agent.network, env=env, config=config, temperature=0.0)
    root_player = int(state.current_player)
    nodes = build_tree(env, state, out, root_player)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(env.render(state))
  print(f"\n{env.id}, step {agent.step}, {config.num_simulations} simulations, "
        f"player {root_player} to move; search plays a{int(out.action[0])}, "
        f"root value {float(out.root_value[0]):+.3f} (its own view)\n")
  print(text_tree(nodes, args.depth))
  title = (f"{env.id} step {agent.step}: {config.num_simulations} simulations, "
           f"P{root_player} to move (values: P{root_player}'s view, Q: the mover's)")
  try:
    with open(args.svg, "w", encoding="utf-8") as f:
      f.write(svg_tree(nodes, root_player, title, args.depth))
  except OSError as e:
    print(f"error: cannot write --svg {args.svg!r}: {e}", file=sys.stderr)
    return 2
  print(f"\nwrote {args.svg}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
