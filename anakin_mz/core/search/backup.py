"""Backups of a finished NDMZ tree, recomputed bottom-up from each node's
children: the expectimax backup (`final_move="expectimax"`) and the chance
expectation (`SearchConfig.backup="expectation"`).

MCTS backs up the *mean* of every simulation through a node, so a node's
value mixes the depths its simulations reached and, at a node of the
opponent, every reply PUCT tried, the bad ones included. Comparing root
moves by that mean (`final_move="q"`) played below the visits on Nannon
(`docs/results/planning.md`): a move explored deeper carries more of the
opponent's tried-but-poor replies, and at a chance node the outcomes its
simulations happened to visit, in their visit shares rather than their
probabilities. `backup_values` recomputes every node's value from its own
children, bottom-up, on the part of the tree the search grew, with one rule
per node kind:

* a choice node, `choice="max"` (expectimax): the best of its expanded
  children for its mover (`r + discount * V*`, in the mover's view), or its
  own network value where that is better (the children not expanded may hold
  a better move: the best expanded child is a lower bound, the network value
  an estimate of the whole); `choice="mean"` (MCTS's): `(raw + sum_c N_c (r_c
  + discount * V*_c)) / (1 + sum_c N_c)`, the visit-weighted mean;
* a chance node, `chance="expectation"`: `sum_c p_c (r_c + discount * V*_c)`
  over the expanded outcomes, the probability of the others times the node's
  own value (`p` the chance prior the tree holds: the model's chance
  policy); `chance="mean"`: the visit-weighted mean as above (both "mean"
  rules give back mctx's own node values);
* a terminal node: 0 (its reward is on the edge into it);
* a leaf (nothing expanded below it): its network value.

Every value is in the root mover's view, as the tree's (`search.tree`).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.search.tree import _CHANCE, _CHOICE, _TERMINAL, mover_sign


CHOICE_RULES = ("max", "mean")
CHANCE_RULES = ("expectation", "mean")


def backup_values(
  tree: mctx.Tree,
  *,
  num_actions: int,
  num_outcomes: int,
  flip_opponents: bool,
  choice: str = "max",
  chance: str = "expectation",
) -> chex.Array:
  """`[B, N]` the backup (module doc; `choice` in `CHOICE_RULES`, `chance` in
  `CHANCE_RULES`) of each node of an NDMZ tree (`tree.embeddings` a
  `tree._Node`; not the paper's tree), root mover's view. Nodes the search
  never created are 0."""
  if choice not in CHOICE_RULES or chance not in CHANCE_RULES:
    raise ValueError(
      f"backup rules must be choice in {CHOICE_RULES} and chance in {CHANCE_RULES}, "
      f"got {choice!r} and {chance!r}"
    )
  batch, num_nodes = tree.node_values.shape
  kind = tree.embeddings.kind
  sign = mover_sign(tree.embeddings.player, flip_opponents)  # [B, N]
  slots = jnp.arange(tree.num_actions)
  rows = jnp.arange(batch)

  def mean(i, edge, ok, raw):
    visits = jnp.where(ok, tree.children_visits[:, i, :], 0).astype(edge.dtype)
    total = jnp.sum(visits * jnp.where(ok, edge, 0.0), axis=1)
    return (raw + total) / (1.0 + jnp.sum(visits, axis=1))

  def node(i, values):
    child = tree.children_index[:, i, :]  # [B, S]
    expanded = child != tree.UNVISITED
    child_value = jnp.take_along_axis(values, jnp.maximum(child, 0), axis=1)
    edge = tree.children_rewards[:, i, :] + tree.children_discounts[:, i, :] * child_value
    raw = tree.raw_values[:, i]
    s = sign[:, i]
    choice_ok = expanded & (slots < num_actions)[None, :]
    if choice == "max":
      # The mover's best expanded action slot (< A), or the raw value.
      best = jnp.max(jnp.where(choice_ok, s[:, None] * edge, -jnp.inf), axis=1)
      choice_value = s * jnp.maximum(best, s * raw)
    else:
      choice_value = mean(i, edge, choice_ok, raw)
    chance_ok = expanded & (slots < num_outcomes)[None, :]
    if chance == "expectation":
      # The expanded outcomes by their probability, the rest at raw.
      probs = jax.nn.softmax(
        jnp.where(slots < num_outcomes, tree.children_prior_logits[:, i, :], -jnp.inf), axis=1
      )
      seen = jnp.sum(jnp.where(chance_ok, probs, 0.0), axis=1)
      chance_value = jnp.sum(jnp.where(chance_ok, probs * edge, 0.0), axis=1) + (1.0 - seen) * raw
    else:
      chance_value = mean(i, edge, chance_ok, raw)
    value = jnp.where(
      kind[:, i] == _TERMINAL,
      0.0,
      jnp.where(
        kind[:, i] == _CHANCE, chance_value, jnp.where(kind[:, i] == _CHOICE, choice_value, raw)
      ),
    )
    exists = tree.node_visits[:, i] > 0
    return values.at[rows, i].set(jnp.where(exists, value, 0.0))

  values = jnp.zeros((batch, num_nodes), tree.node_values.dtype)
  # Children are created after their parents: a descending sweep sees every
  # child's backup before its parent's.
  return jax.lax.fori_loop(0, num_nodes, lambda j, v: node(num_nodes - 1 - j, v), values)


def expectimax_values(
  tree: mctx.Tree, *, num_actions: int, num_outcomes: int, flip_opponents: bool
) -> chex.Array:
  """`[B, N]` the expectimax backup (`backup_values` with max at choice
  nodes and the expectation at chance nodes)."""
  return backup_values(
    tree, num_actions=num_actions, num_outcomes=num_outcomes, flip_opponents=flip_opponents
  )


def with_expected_chance(tree: mctx.Tree, *, num_actions: int, num_outcomes: int) -> mctx.Tree:
  """`tree` with its node values re-backed-up by `backup_values` (choice
  "mean", chance "expectation"): MCTS's values, except that every chance
  node weighs its outcomes by their probability rather than by their visits
  (`SearchConfig.backup="expectation"`). `tree.qvalues` then reads them."""
  values = backup_values(
    tree,
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    flip_opponents=False,  # the mean and the expectation need no mover's view
    choice="mean",
    chance="expectation",
  )
  batch, num_nodes, num_slots = tree.children_index.shape
  child = tree.children_index.reshape(batch, num_nodes * num_slots)
  child_values = jnp.take_along_axis(values, jnp.maximum(child, 0), axis=1)
  child_values = jnp.where(child != tree.UNVISITED, child_values, 0.0)
  # mctx keeps each edge's child value apart (`children_values`, what
  # `qvalues` reads): both are replaced.
  return tree.replace(
    node_values=values, children_values=child_values.reshape(batch, num_nodes, num_slots)
  )


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
