"""The NDMZ paper's tree (`SearchConfig.tree="paper"`): section 3.3 and the
Appendix A pseudocode (NDMZSEARCH, TREESELECT, EXPAND, BACKUP), on mctx's
`Tree` arrays with a simulation loop of its own (`mctx.search` backs up every
simulation). See `SearchConfig.tree` for how it differs from the default tree.

Nodes (`_PaperNode.kind`):

* choice (0): the root, and a child of an identity node along a relative
  player's edge. Its children are identity nodes, one per action, picked by
  this config's PUCT (`puct._puct_slot`, the same as the default tree's).
  Its prior is the choice policy f gave at its identity parent, and its value
  is that parent's value (pseudocode line 72).
* chance (1): the child along the chance edge. Children: identity nodes, one
  per chance outcome, drawn by `chance_mode` from the chance policy f gave at
  the identity parent.
* terminal (2): the child along the terminal edge. No children: a simulation
  that reaches it stops there (TREESELECT line 43).
* identity (3): the child of a choice or chance node along an action, the
  only node whose expansion calls the model (g then f; the reward is
  dropped, line 57). Its P + 2 children (P choice players, chance, terminal)
  are picked by roulette on the identity head at every visit (line 48), or by
  argmax with `identity_mode="argmax"`. Its children share its latent.

A simulation walks down from the root until it reaches a terminal node or an
edge with no node yet, which it expands (one expansion per simulation, as
TREESELECT returns EXPAND's node). It backs up only if it ended at a choice
or a terminal node (NDMZSEARCH line 6). The value backed up is the node's
`anchor`: a choice node's own value, and for any other node the anchor of its
parent (so a terminal node backs up the value of the closest choice node above
it, BACKUP lines 23-28; the root's anchor is the root's value). Going up,
each edge multiplies it by its discount (`config.discount` on the edges into
identity nodes, where the model steps, 1 below them); no reward is added.

The statistics are mctx's (`node_visits`, `node_values` as running means,
`children_visits`, `children_values`) counted over the backups only: a node
made by a simulation that backs nothing up has 0 visits, so its Q stays 0, as
the paper's result node's does. In the root mover's view, as everywhere in
this package: the paper adds the leaf's value to result nodes of the leaf's
player and subtracts it for the other, which is what the sign at each choice
node (`tree.mover_sign`) does with one root-view sum.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.search.tree import (
  _CHANCE,
  _CHOICE,
  _TERMINAL,
  _masked_argmax,
  _pad,
  _select,
  check_model_output,
)
from anakin_mz.core.types import ModelOutput

_IDENTITY = 3


@chex.dataclass(frozen=True)
class _PaperNode:
  """What the paper's tree stores per node.

  Attributes:
    embedding: the user's latent (an identity node's children share it).
    kind: int32 `_CHOICE`, `_CHANCE`, `_TERMINAL` or `_IDENTITY`.
    player: int32 relative player of a choice node, else 0.
    policy_logits: `[A]` f's choice policy at the latent (what a choice child
      of an identity node takes as its prior).
    chance_logits: `[C]` f's chance policy at the latent.
    anchor: the value a simulation that ends here backs up (module doc).
  """

  embedding: chex.ArrayTree
  kind: chex.Array
  player: chex.Array
  policy_logits: chex.Array
  chance_logits: chex.Array
  anchor: chex.Array


def run_paper_tree(
  params,
  search_key,
  root: ModelOutput,
  recurrent_fn,
  *,
  root_prior,
  root_invalid,
  choice,
  num_actions,
  num_outcomes,
  num_slots,
  num_players,
  flip_opponents,
  config,
) -> mctx.Tree:
  """The paper's tree grown by `config.num_simulations` simulations from a
  batch of roots (choice nodes of relative player 0 with prior `root_prior`
  `[B, S]`, `root_invalid` `[B, S]`); `choice` is the choice nodes' rule
  (`puct._puct_slot`, partially applied)."""
  batch_size = root_prior.shape[0]
  zeros_b = jnp.zeros((batch_size,), jnp.int32)
  mctx_root = mctx.RootFnOutput(
    prior_logits=root_prior,
    value=root.value,
    embedding=_PaperNode(
      embedding=root.embedding,
      kind=zeros_b + _CHOICE,
      player=zeros_b,
      policy_logits=root.policy_logits,
      chance_logits=root.chance_logits,
      anchor=root.value,
    ),
  )
  tree = _allocate(mctx_root, config.num_simulations + 1, root_invalid)
  select = functools.partial(
    _paper_select,
    choice=choice,
    num_outcomes=num_outcomes,
    num_players=num_players,
    flip_opponents=flip_opponents,
    config=config,
  )
  expand = functools.partial(
    _expand,
    recurrent_fn=recurrent_fn,
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    num_slots=num_slots,
    num_players=num_players,
    config=config,
  )

  def body(sim, loop_state):
    rng_key, tree = loop_state
    rng_key, simulate_key, expand_key = jax.random.split(rng_key, 3)
    keys = jax.random.split(simulate_key, batch_size)
    node, slot, expands = _simulate(keys, tree, select)
    new_node = jnp.full((batch_size,), sim + 1, jnp.int32)
    tree = expand(params, expand_key, tree, node, slot, new_node, expands)
    leaf = jnp.where(expands, new_node, node)
    return rng_key, _backward(tree, leaf)

  _, tree = jax.lax.fori_loop(0, config.num_simulations, body, (search_key, tree))
  return tree


def _allocate(root: mctx.RootFnOutput, num_nodes: int, root_invalid) -> mctx.Tree:
  """An empty tree of `num_nodes` nodes with its root filled in (visits 1,
  value and raw value the root's), as `mctx.search` allocates it."""
  batch_size, num_slots = root.prior_logits.shape
  dtype = root.value.dtype
  nodes = (batch_size, num_nodes)
  slots = nodes + (num_slots,)
  embeddings = jax.tree.map(
    lambda x: jnp.zeros(nodes + x.shape[1:], x.dtype).at[:, 0].set(x), root.embedding
  )
  return mctx.Tree(
    node_visits=jnp.zeros(nodes, jnp.int32).at[:, 0].set(1),
    raw_values=jnp.zeros(nodes, dtype).at[:, 0].set(root.value),
    node_values=jnp.zeros(nodes, dtype).at[:, 0].set(root.value),
    parents=jnp.full(nodes, mctx.Tree.NO_PARENT, jnp.int32),
    action_from_parent=jnp.full(nodes, mctx.Tree.NO_PARENT, jnp.int32),
    children_index=jnp.full(slots, mctx.Tree.UNVISITED, jnp.int32),
    children_prior_logits=jnp.zeros(slots, root.prior_logits.dtype).at[:, 0].set(root.prior_logits),
    children_values=jnp.zeros(slots, dtype),
    children_visits=jnp.zeros(slots, jnp.int32),
    children_rewards=jnp.zeros(slots, dtype),
    children_discounts=jnp.zeros(slots, dtype),
    embeddings=embeddings,
    root_invalid_actions=root_invalid,
    extra_data=None,
  )


def _paper_select(
  rng_key,
  tree: mctx.Tree,
  node_index,
  depth,
  *,
  choice,
  num_outcomes,
  num_players,
  flip_opponents,
  config,
):
  """The slot a simulation takes at a node of an unbatched tree: the default
  tree's rule (`tree._select`) at choice and chance nodes, and at an identity
  node a roulette draw on its identity probabilities (or their argmax)."""
  base = _select(
    rng_key,
    tree,
    node_index,
    depth,
    choice=choice,
    num_outcomes=num_outcomes,
    flip_opponents=flip_opponents,
    config=config,
  )
  logits = tree.children_prior_logits[node_index]
  invalid = jnp.arange(tree.num_actions) >= num_players + 2
  if config.identity_mode == "sample":
    # Inverse CDF from one uniform, as the chance draw of `tree._select`.
    probs = jnp.where(invalid, 0.0, jax.nn.softmax(logits))
    cdf = jnp.cumsum(probs)
    u = jax.random.uniform(jax.random.fold_in(rng_key, 2), ()) * cdf[-1]
    identity_slot = jnp.minimum(jnp.sum(cdf <= u), num_players + 1)
  else:
    identity_slot = _masked_argmax(logits, invalid)
  kind = tree.embeddings.kind[node_index]
  return jnp.where(kind == _IDENTITY, identity_slot, base).astype(jnp.int32)


class _Walk(NamedTuple):
  rng_key: chex.PRNGKey
  node: chex.Array
  slot: chex.Array
  next_node: chex.Array
  depth: chex.Array
  going: chex.Array


@functools.partial(jax.vmap, in_axes=(0, 0, None))
def _simulate(rng_key, tree: mctx.Tree, select):
  """TREESELECT on an unbatched tree: from the root down to a terminal node,
  or to an edge without a node. Returns (node, slot, expands): `expands`
  True means expand `slot` of `node`; False means `node` is the terminal
  node the walk stopped at."""

  def step(walk):
    node = walk.next_node
    rng_key, key = jax.random.split(walk.rng_key)
    slot = select(key, tree, node, walk.depth)
    next_node = tree.children_index[node, slot]
    at_terminal = tree.embeddings.kind[node] == _TERMINAL
    going = ~at_terminal & (next_node != mctx.Tree.UNVISITED)
    return _Walk(rng_key, node, slot, next_node, walk.depth + 1, going)

  start = _Walk(
    rng_key=rng_key,
    node=jnp.int32(mctx.Tree.NO_PARENT),
    slot=jnp.int32(mctx.Tree.NO_PARENT),
    next_node=jnp.int32(mctx.Tree.ROOT_INDEX),
    depth=jnp.int32(0),
    going=jnp.array(True),
  )
  end = jax.lax.while_loop(lambda w: w.going, step, start)
  return end.node, end.slot, tree.embeddings.kind[end.node] != _TERMINAL


def _expand(
  params,
  rng_key,
  tree: mctx.Tree,
  parent,
  slot,
  new_node,
  expands,
  *,
  recurrent_fn,
  num_actions,
  num_outcomes,
  num_slots,
  num_players,
  config,
) -> mctx.Tree:
  """EXPAND for a batch: node `new_node` `[B]` becomes child `slot` of
  `parent` where `expands`; the other lanes' trees are unchanged. Below a
  choice or chance node the model makes an identity node; below an identity
  node the child of class `slot` takes its parent's latent, value and
  policies (no model call is used)."""
  batch_size = parent.shape[0]
  lanes = jnp.arange(batch_size)
  up = jax.tree.map(lambda x: x[lanes, parent], tree.embeddings)
  unified = jnp.where(
    up.kind == _CHANCE,
    num_actions + jnp.minimum(slot, num_outcomes - 1),
    jnp.minimum(slot, num_actions - 1),
  ).astype(jnp.int32)
  out = recurrent_fn(params, rng_key, unified, up.embedding)
  check_model_output(out, up.embedding, batch_size, num_actions, num_outcomes, num_players)
  dtype = tree.node_values.dtype

  identity_logits = out.identity_logits.astype(tree.children_prior_logits.dtype)
  if not config.terminal_nodes:
    identity_logits = identity_logits.at[:, num_players + 1].set(-jnp.inf)

  below_identity = up.kind == _IDENTITY
  cls_kind = jnp.where(
    slot < num_players, _CHOICE, jnp.where(slot == num_players, _CHANCE, _TERMINAL)
  )
  kind = jnp.where(below_identity, cls_kind, _IDENTITY).astype(jnp.int32)
  player = jnp.where(below_identity & (slot < num_players), slot, 0).astype(jnp.int32)
  parent_value = tree.raw_values[lanes, parent]
  anchor = jnp.where(kind == _CHOICE, parent_value, up.anchor).astype(dtype)
  value = jnp.where(
    below_identity, jnp.where(kind == _TERMINAL, anchor, parent_value), out.value
  ).astype(dtype)
  zeros = jnp.zeros((batch_size, num_slots), tree.children_prior_logits.dtype)
  prior = jnp.where(
    below_identity[:, None],
    jnp.where(
      (kind == _CHOICE)[:, None],
      _pad(up.policy_logits, num_slots),
      jnp.where((kind == _CHANCE)[:, None], _pad(up.chance_logits, num_slots), zeros),
    ),
    _pad(identity_logits, num_slots),
  )

  def pick(old, new):  # the parent's where it is below an identity node
    shape = (-1,) + (1,) * (new.ndim - 1)
    return jnp.where(below_identity.reshape(shape), old, new)

  node = _PaperNode(
    embedding=jax.tree.map(pick, up.embedding, out.embedding),
    kind=kind,
    player=player,
    policy_logits=pick(up.policy_logits, out.policy_logits),
    chance_logits=pick(up.chance_logits, out.chance_logits),
    anchor=anchor,
  )
  discount = jnp.where(below_identity, 1.0, config.discount).astype(dtype)

  def put(array, value, *index):
    """array[lane, *index] = value where the lane expands."""
    old = array[(lanes,) + index]
    keep = expands.reshape((-1,) + (1,) * (old.ndim - 1))
    return array.at[(lanes,) + index].set(jnp.where(keep, value, old))

  return tree.replace(
    children_prior_logits=put(tree.children_prior_logits, prior, new_node),
    raw_values=put(tree.raw_values, value, new_node),
    node_values=put(tree.node_values, value, new_node),
    embeddings=jax.tree.map(lambda t, x: put(t, x, new_node), tree.embeddings, node),
    children_index=put(tree.children_index, new_node, parent, slot),
    children_discounts=put(tree.children_discounts, discount, parent, slot),
    parents=put(tree.parents, parent, new_node),
    action_from_parent=put(tree.action_from_parent, slot, new_node),
  )


@jax.vmap
def _backward(tree: mctx.Tree, leaf) -> mctx.Tree:
  """BACKUP on an unbatched tree, from node `leaf` where the simulation
  ended: nothing unless it is a choice or terminal node; else its anchor,
  discounted edge by edge and without rewards, into the running mean and the
  visit count of every node from the leaf up to the root."""
  kind = tree.embeddings.kind[leaf]
  backs_up = (kind == _CHOICE) | (kind == _TERMINAL)

  def add(tree, index, value):
    count = tree.node_visits[index]
    mean = (tree.node_values[index] * count + value) / (count + 1.0)
    return tree.replace(
      node_values=tree.node_values.at[index].set(mean),
      node_visits=tree.node_visits.at[index].set(count + 1),
    )

  def up(state):
    tree, value, index = state
    parent = tree.parents[index]
    slot = tree.action_from_parent[index]
    value = tree.children_discounts[parent, slot] * value
    tree = add(tree, parent, value)
    tree = tree.replace(
      children_values=tree.children_values.at[parent, slot].set(tree.node_values[index]),
      children_visits=tree.children_visits.at[parent, slot].set(tree.node_visits[index]),
    )
    return tree, value, parent

  value = tree.embeddings.anchor[leaf]
  count = tree.node_visits[leaf]
  tree = tree.replace(
    node_values=tree.node_values.at[leaf].set(
      jnp.where(
        backs_up, (tree.node_values[leaf] * count + value) / (count + 1.0), tree.node_values[leaf]
      )
    ),
    node_visits=tree.node_visits.at[leaf].set(jnp.where(backs_up, count + 1, count)),
  )
  tree, _, _ = jax.lax.while_loop(
    lambda s: backs_up & (s[2] != mctx.Tree.ROOT_INDEX), up, (tree, value, leaf)
  )
  return tree
