"""One NDMZ search tree, drawn as text and as SVG (in the spirit of MooZi's
Figure 5.9), with the true game states overlaid. `scripts/show_search.py` is
its command line; see its doc for what every node shows.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Tuple
from xml.sax.saxutils import escape

import jax
import numpy as np

import envs
from anakin_mz.core import act
from anakin_mz.core import registry
from anakin_mz.runtime import restore
from anakin_mz.core.search import mover_sign

# 3: the identity nodes of the paper's tree (`search.tree: paper`).
KIND_NAMES = {0: "choice", 1: "chance", 2: "terminal", 3: "identity"}


@dataclasses.dataclass
class Node:
  """One node of the drawn tree."""

  index: int
  parent: int
  depth: int
  edge: str  # the action into it ("" at the root)
  kind: str  # predicted: "choice P1", "chance", "terminal"
  prior: float
  visits: int
  q: float  # Q of the edge, from the parent's mover (nan at root)
  reward: float  # predicted reward of the edge (root mover's view)
  value: float  # node value (root mover's view)
  real: str  # true state: "decision P1", "chance", "terminal", "delusion"
  children: List[int] = dataclasses.field(default_factory=list)


def position(env: envs.Env, seed: int, moves: int) -> envs.State:
  """The decision state after `moves` random transitions from a new game."""
  key = jax.random.PRNGKey(seed)
  key, k0 = jax.random.split(key)
  step = jax.jit(env.step)
  state = jax.jit(env.init)(k0)
  done = 0
  while True:
    if bool(state.done):
      raise ValueError(
        f"the game ended after {done} random transitions; use fewer --moves than {moves}"
      )
    if done >= moves and int(state.current_player) >= 0:
      return state
    key, k = jax.random.split(key)
    if int(state.current_player) == envs.CHANCE:
      a = envs.chance_outcome(state, k)
    else:
      a = envs.random_policy(state, k)
    state = step(state, a)
    done += 1


def build_tree(env, state, out, root_player: int) -> Dict[int, Node]:
  """The expanded nodes of search output `out` (batch of 1) with the true
  game states overlaid."""
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

  nodes = {
    0: Node(
      0,
      -1,
      0,
      "",
      kind_text(0) + " (root)",
      1.0,
      int(visits[0]),
      float("nan"),
      0.0,
      float(values[0]),
      real_text(state),
    )
  }
  real = {0: state}
  todo = [0]
  while todo:
    n = todo.pop(0)
    z = logits[n] - logits[n].max()
    prior = np.exp(z) / np.exp(z).sum()
    sign = float(mover_sign(players[n], zero_sum)) if kinds[n] == 0 else 1.0
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
      elif kinds[n] == 3:  # the class drawn: the same state, its mover named
        edge = f"is P{(root_player + int(slot)) % num_players}" if slot < num_players else ""
        edge = edge or ("is chance" if slot == num_players else "is terminal")
        nxt = s
      elif kinds[n] == 1:
        edge = f"chance {slot}"
        if (
          s is not None
          and int(s.current_player) == envs.CHANCE
          and slot < env.num_chance_outcomes
          and float(s.chance_probs[slot]) > 0
        ):
          edge = f"chance {slot} (true p={float(s.chance_probs[slot]):.2f})"
          nxt = step(s, np.int32(slot))
      else:
        edge = "(past terminal)"
      real[c] = nxt
      q = sign * float(rewards[n, slot] + cvalues[n, slot])
      nodes[c] = Node(
        c,
        n,
        nodes[n].depth + 1,
        edge,
        kind_text(c),
        float(prior[slot]),
        int(visits[c]),
        q,
        float(rewards[n, slot]),
        float(values[c]),
        real_text(nxt),
      )
      nodes[n].children.append(c)
      todo.append(c)
  # A predicted node whose kind disagrees with the true state is a delusion.
  for n, node in nodes.items():
    if n and node.real != "delusion" and node.kind != "identity":
      predicted = node.kind.split()[0]
      actual = node.real.split()[0]
      if {"choice": "decision"}.get(predicted, predicted) != actual or (
        predicted == "choice" and node.kind.split()[1] != node.real.split()[1]
      ):
        node.real += " (kind mispredicted)"
  return nodes


def text_tree(nodes: Dict[int, Node], max_depth: Optional[int] = None) -> str:
  """The tree as indented text."""
  lines = []

  def walk(n, prefix, last):
    node = nodes[n]
    if node.parent < 0:
      head = f"[{n}] {node.kind}  N={node.visits}  V={node.value:+.3f}  real: {node.real}"
      lines.append(head)
    else:
      branch = "`- " if last else "|- "
      lines.append(
        f"{prefix}{branch}{node.edge}  p={node.prior:.2f} N={node.visits} "
        f"Q={node.q:+.3f} r={node.reward:+.3f} -> [{n}] {node.kind} "
        f"V={node.value:+.3f}  real: {node.real}"
      )
      prefix += "   " if last else "|  "
    if max_depth is not None and node.depth >= max_depth:
      if node.children:
        lines.append(f"{prefix}   ... {len(node.children)} children")
      return
    for i, c in enumerate(node.children):
      walk(c, prefix, i == len(node.children) - 1)

  walk(0, "", True)
  return "\n".join(lines)


COLORS = {
  "choice0": "#cfe2ff",
  "choice1": "#f8d7da",
  "chance": "#fff3cd",
  "terminal": "#d3d3d3",
  "delusion": "#ffe4ec",
}


def svg_tree(
  nodes: Dict[int, Node], root_player: int, title: str, max_depth: Optional[int] = None
) -> str:
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
  pos = {n: (20 + xs[n] * (box_w + gap_x), 50 + nodes[n].depth * (box_h + gap_y)) for n in shown}
  parts = [
    f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
    f'font-family="monospace" font-size="10">',
    f'<text x="20" y="24" font-size="13">{escape(title)}</text>',
  ]
  for n in shown:
    node = nodes[n]
    if node.parent < 0 or node.parent not in shown:
      continue
    x0, y0 = pos[node.parent]
    x1, y1 = pos[n]
    parts.append(
      f'<line x1="{x0 + box_w / 2}" y1="{y0 + box_h}" x2="{x1 + box_w / 2}" '
      f'y2="{y1}" stroke="#888" stroke-width="{1 + np.log1p(node.visits):.1f}"/>'
    )
    label = f"{node.edge[:22]} p={node.prior:.2f} Q={node.q:+.2f}"
    parts.append(
      f'<text x="{x1 + box_w / 2}" y="{y1 - 6}" text-anchor="middle" '
      f'fill="#444">{escape(label)}</text>'
    )
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
    parts.append(
      f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="5" '
      f'fill="{color}" stroke="{border}"/>'
    )
    rows = [
      f"#{n} {node.kind}",
      f"N={node.visits} V={node.value:+.3f}",
      f"r={node.reward:+.3f}",
      f"real: {node.real}"[:26],
    ]
    for i, row in enumerate(rows):
      parts.append(f'<text x="{x + 5}" y="{y + 13 + 13 * i}">{escape(row)}</text>')
  parts.append("</svg>")
  return "\n".join(parts)


def show(
  agent: restore.Agent,
  *,
  moves: int = 0,
  seed: int = 0,
  simulations: Optional[int] = None,
  max_depth: Optional[int] = None,
) -> Tuple[str, str]:
  """One greedy search (no root noise) of `agent` at the decision state after
  `moves` random transitions (`position`), key `PRNGKey(seed)`. Returns
  (the board and the tree as text, the tree as an SVG document).

  Raises:
    ValueError: the agent's search is not the NDMZ tree (tdlambda has no
      tree; stochastic_muzero's is mctx's, without NDMZ's node kinds), or a
      negative `max_depth`.
  """
  if max_depth is not None and max_depth < 0:
    raise ValueError(f"max_depth must be >= 0 (0 draws the root alone), got {max_depth}")
  if not agent.spec.capabilities.tree:
    trees = [n for n in registry.names() if registry.get(n).capabilities.tree]
    raise ValueError(
      f"show_search draws the NDMZ search tree (agents {' and '.join(trees)}); this "
      f"checkpoint's agent is {agent.config.agent!r}"
    )
  env = agent.env
  config = act.eval_search_config(agent.config.playing_search)
  if simulations is not None:
    config = dataclasses.replace(config, num_simulations=simulations)
  state = position(env, seed, moves)
  batched = jax.tree.map(lambda x: x[None], state)
  out = agent.spec.search(
    agent.params,
    batched,
    jax.random.PRNGKey(seed),
    model=agent.network,
    env=env,
    config=config,
    temperature=0.0,
  )
  root_player = int(state.current_player)
  nodes = build_tree(env, state, out, root_player)
  text = "\n".join(
    [
      env.render(state),
      f"\n{env.id}, step {agent.step}, {config.num_simulations} simulations, "
      f"player {root_player} to move; search plays a{int(out.action[0])}, "
      f"root value {float(out.root_value[0]):+.3f} (its own view)\n",
      text_tree(nodes, max_depth),
    ]
  )
  title = (
    f"{env.id} step {agent.step}: {config.num_simulations} simulations, "
    f"P{root_player} to move (values: P{root_player}'s view, Q: the mover's)"
  )
  return text, svg_tree(nodes, root_player, title, max_depth)
