"""The expectimax backup of a finished NDMZ tree (`final_move="expectimax"`).

MCTS backs up the *mean* of every simulation through a node, so a node's
value mixes the depths its simulations reached and, at a node of the
opponent, every reply PUCT tried, the bad ones included. Comparing root
moves by that mean (`final_move="q"`) played below the visits on Nannon
(`docs/results/planning.md`): a move explored deeper carries more of the
opponent's tried-but-poor replies. The expectimax backup recomputes every
node's value from its own children, bottom-up, as expectimax would on the
part of the tree the search grew:

* a choice node: the best of its expanded children for its mover
  (`r + discount * V*`, in the mover's view), or its own network value
  where that is better (the children not expanded may hold a better move:
  the best expanded child is a lower bound, the network value an estimate
  of the whole);
* a chance node: `sum_c p_c (r_c + discount * V*_c)` over the expanded
  outcomes, the probability of the others times the node's own network value
  (`p` the chance prior the tree holds: the model's chance policy);
* a terminal node: 0 (its reward is on the edge into it);
* a leaf (nothing expanded below it): its network value.

Every value is in the root mover's view, as the tree's (`search.tree`).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.search.tree import _CHANCE, _CHOICE, _TERMINAL, mover_sign


def expectimax_values(
  tree: mctx.Tree, *, num_actions: int, num_outcomes: int, flip_opponents: bool
) -> chex.Array:
  """`[B, N]` the expectimax backup (module doc) of each node of an NDMZ
  tree (`tree.embeddings` a `tree._Node`; not the paper's tree), root
  mover's view. Nodes the search never created are 0."""
  batch, num_nodes = tree.node_values.shape
  kind = tree.embeddings.kind
  sign = mover_sign(tree.embeddings.player, flip_opponents)  # [B, N]
  slots = jnp.arange(tree.num_actions)
  rows = jnp.arange(batch)

  def node(i, values):
    child = tree.children_index[:, i, :]  # [B, S]
    expanded = child != tree.UNVISITED
    child_value = jnp.take_along_axis(values, jnp.maximum(child, 0), axis=1)
    edge = tree.children_rewards[:, i, :] + tree.children_discounts[:, i, :] * child_value
    raw = tree.raw_values[:, i]
    s = sign[:, i]
    # Choice: the mover's best expanded action slot (< A), or the raw value.
    choice_ok = expanded & (slots < num_actions)[None, :]
    best = jnp.max(jnp.where(choice_ok, s[:, None] * edge, -jnp.inf), axis=1)
    choice = s * jnp.maximum(best, s * raw)
    # Chance: the expanded outcomes by their probability, the rest at raw.
    probs = jax.nn.softmax(
      jnp.where(slots < num_outcomes, tree.children_prior_logits[:, i, :], -jnp.inf), axis=1
    )
    chance_ok = expanded & (slots < num_outcomes)[None, :]
    seen = jnp.sum(jnp.where(chance_ok, probs, 0.0), axis=1)
    chance = jnp.sum(jnp.where(chance_ok, probs * edge, 0.0), axis=1) + (1.0 - seen) * raw
    value = jnp.where(
      kind[:, i] == _TERMINAL,
      0.0,
      jnp.where(kind[:, i] == _CHANCE, chance, jnp.where(kind[:, i] == _CHOICE, choice, raw)),
    )
    exists = tree.node_visits[:, i] > 0
    return values.at[rows, i].set(jnp.where(exists, value, 0.0))

  values = jnp.zeros((batch, num_nodes), tree.node_values.dtype)
  # Children are created after their parents: a descending sweep sees every
  # child's backup before its parent's.
  return jax.lax.fori_loop(0, num_nodes, lambda j, v: node(num_nodes - 1 - j, v), values)


def expectimax_root_q(
  tree: mctx.Tree, *, num_actions: int, num_outcomes: int, flip_opponents: bool
) -> chex.Array:
  """`[B, A]` each root action's `r + discount * V*(child)` (root mover's
  view; `-inf` where the child was never expanded)."""
  values = expectimax_values(
    tree, num_actions=num_actions, num_outcomes=num_outcomes, flip_opponents=flip_opponents
  )
  root = tree.ROOT_INDEX
  child = tree.children_index[:, root, :num_actions]
  child_value = jnp.take_along_axis(values, jnp.maximum(child, 0), axis=1)
  q = tree.children_rewards[:, root, :num_actions] + (
    tree.children_discounts[:, root, :num_actions] * child_value
  )
  return jnp.where(child != tree.UNVISITED, q, -jnp.inf)
