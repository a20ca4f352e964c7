"""The NDMZ tree on `mctx.search`: the nodes' kinds and players (`_Node`),
the expansion through the model (`_recurrent`) and the slot selection at
chance and terminal nodes (`_select`); the choice nodes' rule is the
root's (`puct`, `gumbel`). See `anakin_mz.core.search`."""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.types import ModelOutput

# Node kinds stored in `_Node.kind`.
_CHOICE = 0
_CHANCE = 1
_TERMINAL = 2


@chex.dataclass(frozen=True)
class _Node:
  """What the tree stores per node: the user's embedding plus the NDMZ flags."""

  embedding: chex.ArrayTree
  kind: chex.Array  # [B] int32: _CHOICE, _CHANCE or _TERMINAL
  player: chex.Array  # [B] int32: relative player of a choice node, else 0


def _run_tree(
  params,
  search_key,
  root: ModelOutput,
  recurrent_fn,
  *,
  root_prior,
  root_invalid,
  root_select,
  interior_select,
  num_actions,
  num_outcomes,
  num_slots,
  num_players,
  config,
  extra_data=None,
) -> mctx.Tree:
  """`mctx.search` over NDMZ nodes, shared by the PUCT and the Gumbel root:
  the root is a choice node of relative player 0 with prior `root_prior`
  `[B, S]` and `root_invalid` `[B, S]`; expansions go through `_recurrent`."""
  zeros_b = jnp.zeros((root_prior.shape[0],), jnp.int32)
  mctx_root = mctx.RootFnOutput(
    prior_logits=root_prior,
    value=root.value,
    embedding=_Node(embedding=root.embedding, kind=zeros_b + _CHOICE, player=zeros_b),
  )
  wrapped_recurrent_fn = functools.partial(
    _recurrent,
    recurrent_fn=recurrent_fn,
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    num_slots=num_slots,
    num_players=num_players,
    config=config,
  )
  return mctx.search(
    params=params,
    rng_key=search_key,
    root=mctx_root,
    recurrent_fn=wrapped_recurrent_fn,
    root_action_selection_fn=root_select,
    interior_action_selection_fn=interior_select,
    num_simulations=config.num_simulations,
    max_depth=config.max_depth,
    invalid_actions=root_invalid,
    extra_data=extra_data,
  )


def _recurrent(
  params,
  rng_key,
  slot,
  node: _Node,
  *,
  recurrent_fn,
  num_actions,
  num_outcomes,
  num_slots,
  num_players,
  config,
):
  """mctx RecurrentFn: expands child `slot` of a batch of nodes."""
  batch_size = slot.shape[0]
  identity_key, model_key = jax.random.split(rng_key)
  unified = jnp.where(
    node.kind == _CHANCE,
    num_actions + jnp.minimum(slot, num_outcomes - 1),
    jnp.where(node.kind == _CHOICE, jnp.minimum(slot, num_actions - 1), 0),
  )
  out = recurrent_fn(params, model_key, unified.astype(jnp.int32), node.embedding)
  check_model_output(out, node.embedding, batch_size, num_actions, num_outcomes, num_players)

  logits = identity_logits(out, num_players, terminal_nodes=config.terminal_nodes)
  if config.identity_mode == "sample":
    identity = jax.random.categorical(identity_key, logits)
  else:
    identity = jnp.argmax(logits, axis=-1)
  kind = jnp.where(
    identity < num_players, _CHOICE, jnp.where(identity == num_players, _CHANCE, _TERMINAL)
  )
  player = jnp.where(identity < num_players, identity, 0)

  # Below a terminal node the model is not used: zeros, and still terminal.
  below_terminal = node.kind == _TERMINAL
  kind = jnp.where(below_terminal, _TERMINAL, kind).astype(jnp.int32)
  player = jnp.where(below_terminal, 0, player).astype(jnp.int32)
  reward = jnp.where(below_terminal, 0.0, out.reward).astype(out.value.dtype)
  value = jnp.where(kind == _TERMINAL, 0.0, out.value).astype(out.value.dtype)
  if config.chance_value == "expected":
    expected = expected_chance_value(
      params,
      jax.random.fold_in(model_key, 1),
      out,
      recurrent_fn,
      num_actions=num_actions,
      num_players=num_players,
      discount=config.discount,
      terminal_nodes=config.terminal_nodes,
    )
    value = jnp.where(kind == _CHANCE, expected, value).astype(value.dtype)
  embedding = jax.tree.map(
    lambda new, old: jnp.where(below_terminal.reshape((-1,) + (1,) * (new.ndim - 1)), old, new),
    out.embedding,
    node.embedding,
  )
  prior = jnp.where(
    (kind == _CHOICE)[:, None],
    _pad(out.policy_logits, num_slots),
    jnp.where(
      (kind == _CHANCE)[:, None],
      _pad(out.chance_logits, num_slots),
      jnp.zeros((batch_size, num_slots), out.policy_logits.dtype),
    ),
  )
  step = mctx.RecurrentFnOutput(
    reward=reward, discount=jnp.full_like(reward, config.discount), prior_logits=prior, value=value
  )
  return step, _Node(embedding=embedding, kind=kind, player=player)


def expected_chance_value(
  params,
  rng_key,
  out: ModelOutput,
  recurrent_fn,
  *,
  num_actions: int,
  num_players: int,
  discount: float,
  terminal_nodes: bool = True,
):
  """`[B]`: nodes `out` read as chance nodes, valued one step of chance
  deeper: sum over outcomes c of `chance_policy(c) * (r_c + discount * v_c)`,
  one `recurrent_fn` call on all `B * C` children; a child the identity head
  calls terminal (argmax; never with `terminal_nodes` off) adds its reward
  only. Root mover's view, as every value of the model. The search's
  `SearchConfig.chance_value="expected"` and the planning diagnosis's
  `model_chance` player both read it."""
  batch_size, num_outcomes = out.chance_logits.shape
  embedding = jax.tree.map(lambda x: jnp.repeat(x, num_outcomes, axis=0), out.embedding)
  outcomes = num_actions + jnp.tile(jnp.arange(num_outcomes, dtype=jnp.int32), batch_size)
  kids = recurrent_fn(params, rng_key, outcomes, embedding)
  check_model_output(
    kids, embedding, batch_size * num_outcomes, num_actions, num_outcomes, num_players
  )
  logits = identity_logits(kids, num_players, terminal_nodes=terminal_nodes)
  terminal = jnp.argmax(logits, axis=-1) == num_players + 1
  leaf = kids.reward + discount * jnp.where(terminal, 0.0, kids.value)
  probs = jax.nn.softmax(out.chance_logits, axis=-1)
  return jnp.sum(probs * leaf.reshape(batch_size, num_outcomes), axis=-1)


def identity_logits(out: ModelOutput, num_players: int, *, terminal_nodes: bool):
  """`[B, P + 2]`: `out`'s identity logits, the terminal class (P + 1) never
  chosen where `terminal_nodes` is off (`SearchConfig.terminal_nodes`)."""
  logits = out.identity_logits
  if not terminal_nodes:
    logits = logits.at[:, num_players + 1].set(-jnp.inf)
  return logits


def check_model_output(out, embedding, batch_size, num_actions, num_outcomes, num_players):
  """The shapes of a `recurrent_fn` output (`types.ModelOutput`) for a batch:
  a clear error at trace time, not a broadcast deep in the tree."""
  for name, shape in (
    ("reward", (batch_size,)),
    ("value", (batch_size,)),
    ("policy_logits", (batch_size, num_actions)),
    ("chance_logits", (batch_size, num_outcomes)),
    ("identity_logits", (batch_size, num_players + 2)),
  ):
    chex.assert_shape(getattr(out, name), shape, custom_message=f"recurrent_fn output {name}")
  chex.assert_trees_all_equal_shapes_and_dtypes(
    out.embedding, embedding, custom_message="recurrent_fn embedding vs the root embedding"
  )


def _select(
  rng_key, tree: mctx.Tree, node_index, depth, *, choice, num_outcomes, flip_opponents, config
):
  """Action (slot) selection at one node of an unbatched tree: at a choice
  node the root's rule `choice(rng_key, tree, node_index, depth, sign)`
  (PUCT, `puct._puct_slot`, or Gumbel MuZero's, `gumbel._gumbel_slot`; `sign`
  turns root-mover values into the mover's), at a chance node a draw from
  (or the deterministic rule on) the chance policy."""
  kind = tree.embeddings.kind[node_index]
  player = tree.embeddings.player[node_index]
  slots = jnp.arange(tree.num_actions)
  visits = tree.children_visits[node_index]
  probs = jax.nn.softmax(tree.children_prior_logits[node_index])

  sign = mover_sign(player, flip_opponents)
  choice_slot = choice(rng_key, tree, node_index, depth, sign)

  chance_invalid = slots >= num_outcomes
  if config.chance_mode == "sample":
    # Inverse CDF from one uniform: a categorical draw would generate S
    # Gumbels at every traversed node, which doubles the selection cost when
    # S is large (75 actions: 0.48x of mctx.muzero_policy's sims/s).
    cdf = jnp.cumsum(jnp.where(chance_invalid, 0.0, probs))
    u = jax.random.uniform(jax.random.fold_in(rng_key, 1), ()) * cdf[-1]
    chance_slot = jnp.minimum(jnp.sum(cdf <= u), num_outcomes - 1)
  else:
    share = visits / (1 + jnp.sum(visits))
    chance_slot = _masked_argmax(probs - share, chance_invalid)

  # Below a terminal node mctx still grows one (zero) node per visit: keep that
  # subtree balanced so the traversal stays shallow.
  terminal_slot = jnp.argmin(visits)

  return jnp.where(
    kind == _CHOICE, choice_slot, jnp.where(kind == _CHANCE, chance_slot, terminal_slot)
  ).astype(jnp.int32)


def mover_sign(player, flip_opponents):
  """+1 or -1: the sign that turns root-mover values into the view of a
  choice node's relative `player` (-1 for the root mover's opponents in
  two-player zero-sum games, `flip_opponents`)."""
  return jnp.where(flip_opponents & (player != 0), -1.0, 1.0)


def _interior_invalid(tree: mctx.Tree, node_index, num_actions):
  """bool `[S]`: the slots an interior choice node may not pick: the padded
  ones (>= A) and those whose prior logit is the masking logit (finfo.min).
  A learned model never gives that logit; a model that knows the legal moves
  (AlphaZero's true model) masks illegal ones with it, as the root does."""
  slots = jnp.arange(tree.num_actions)
  logits = tree.children_prior_logits[node_index]
  return (slots >= num_actions) | (logits <= jnp.finfo(logits.dtype).min)


def _normalized_mover_q(tree: mctx.Tree, node_index, sign, bounds=None):
  """qtransform_by_parent_and_siblings on sign * Q (root POV -> mover POV);
  with `bounds` = (low, high), qtransform_by_min_max on it instead."""
  qvalues = sign * tree.qvalues(node_index)
  if bounds is not None:
    low, high = bounds
    return (qvalues - low) / (high - low)
  visits = tree.children_visits[node_index]
  node_value = sign * tree.node_values[node_index]
  safe_qvalues = jnp.where(visits > 0, qvalues, node_value)
  min_value = jnp.minimum(node_value, jnp.min(safe_qvalues, axis=-1))
  max_value = jnp.maximum(node_value, jnp.max(safe_qvalues, axis=-1))
  completed_by_min = jnp.where(visits > 0, qvalues, min_value)
  return (completed_by_min - min_value) / jnp.maximum(max_value - min_value, 1e-8)


def _masked_argmax(to_argmax, invalid):
  return jnp.argmax(jnp.where(invalid, -jnp.inf, to_argmax)).astype(jnp.int32)


def _pad(x, num_slots, fill=None):
  """Pads the last axis of `x` to `num_slots` (default fill: min logit)."""
  extra = num_slots - x.shape[-1]
  if extra == 0:
    return x
  if fill is None:
    fill = jnp.finfo(x.dtype).min
  return jnp.concatenate([x, jnp.full(x.shape[:-1] + (extra,), fill, x.dtype)], axis=-1)


# The two helpers below copy mctx.muzero_policy's private helpers (same
# math) so that the root prior and the action match it exactly.
def _mask_invalid_actions(logits, invalid_actions):
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def _logits_from_probs(probs):
  return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
