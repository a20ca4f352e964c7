"""The NDMZ search with the Gumbel root (`config.root="gumbel"`,
`mctx.gumbel_muzero_policy`'s root): sequential halving over Gumbel-perturbed
logits at the root, Gumbel MuZero's deterministic rule on the completed Q at
every interior choice node. See `anakin_mz.core.search`."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.search.config import SearchOutput
from anakin_mz.core.search.backup import with_expected_chance
from anakin_mz.core.search.tree import (
  _interior_invalid,
  _mask_invalid_actions,
  _masked_argmax,
  _pad,
  _run_tree,
  _select,
)
from anakin_mz.core.types import ModelOutput


def _gumbel_search(
  params,
  rng_key,
  root: ModelOutput,
  recurrent_fn,
  legal,
  *,
  num_actions,
  num_outcomes,
  num_slots,
  num_players,
  flip_opponents,
  config,
  temperature,
) -> SearchOutput:
  """`ndmz_search` with the Gumbel root (`mctx.gumbel_muzero_policy`'s root,
  its key split, action and policy target; NDMZ nodes below the root)."""
  invalid = jnp.logical_not(legal)
  search_key, gumbel_key = jax.random.split(rng_key)
  prior = _mask_invalid_actions(root.policy_logits, invalid)  # [B, A]
  # temperature scales the noise: argmax(logits + T g) = argmax(logits / T +
  # g) draws from softmax(logits / T) (no Dirichlet noise: this replaces it).
  scale = float(config.gumbel_scale) * jnp.maximum(jnp.asarray(temperature, prior.dtype), 0.0)
  gumbel = scale[..., None] * jax.random.gumbel(gumbel_key, shape=prior.shape, dtype=prior.dtype)
  tree = _run_tree(
    params,
    search_key,
    root,
    recurrent_fn,
    root_prior=_pad(prior, num_slots),
    root_invalid=_pad(invalid.astype(prior.dtype), num_slots, 1.0),
    root_select=functools.partial(_gumbel_root_select, num_actions=num_actions, config=config),
    interior_select=functools.partial(
      _select,
      choice=functools.partial(_gumbel_slot, num_actions=num_actions, config=config),
      num_outcomes=num_outcomes,
      flip_opponents=flip_opponents,
      config=config,
    ),
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    num_slots=num_slots,
    num_players=num_players,
    config=config,
    extra_data=_pad(gumbel, num_slots, 0.0),
  )

  # The root is relative player 0: its completed Q needs no sign.
  q_tree = tree
  if config.backup == "expectation":
    q_tree = with_expected_chance(tree, num_actions=num_actions, num_outcomes=num_outcomes)
  completed_q = jax.vmap(
    functools.partial(_completed_mover_q, sign=1.0, num_actions=num_actions, config=config),
    in_axes=(0, None),
  )(q_tree, tree.ROOT_INDEX)
  visits = tree.children_visits[:, tree.ROOT_INDEX, :num_actions]
  considered_visit = jnp.max(visits, axis=-1, keepdims=True)
  to_argmax = _score_considered(considered_visit, gumbel, prior, completed_q, visits)
  # A row with no legal action: action 0 (every score is -inf).
  action = jnp.argmax(jnp.where(invalid, -jnp.inf, to_argmax), axis=-1).astype(jnp.int32)
  # The completed-Q policy target; uniform where no action is legal (every
  # masked logit is then the same), like the PUCT root's.
  action_weights = jax.nn.softmax(_mask_invalid_actions(prior + completed_q, invalid))
  return SearchOutput(
    action=action,
    action_weights=action_weights,
    root_value=tree.node_values[:, tree.ROOT_INDEX],
    search_tree=tree,
  )


def _gumbel_root_select(rng_key, tree: mctx.Tree, node_index, *, num_actions, config):
  """mctx.gumbel_muzero_root_action_selection (sequential halving with
  Gumbel) on the root's choice slots."""
  del rng_key
  visits = tree.children_visits[node_index, :num_actions]
  logits = tree.children_prior_logits[node_index, :num_actions]
  invalid = tree.root_invalid_actions[:num_actions]
  completed_q = _completed_mover_q(tree, node_index, 1.0, num_actions=num_actions, config=config)
  table = jnp.array(
    _table_of_considered_visits(config.max_num_considered_actions, config.num_simulations)
  )
  num_valid = jnp.sum(1 - invalid).astype(jnp.int32)
  num_considered = jnp.minimum(config.max_num_considered_actions, num_valid)
  # At the root the simulation index is the sum of the visit counts.
  considered_visit = table[num_considered, jnp.sum(visits)]
  to_argmax = _score_considered(
    considered_visit, tree.extra_data[:num_actions], logits, completed_q, visits
  )
  return _masked_argmax(to_argmax, invalid > 0)


def _gumbel_slot(rng_key, tree: mctx.Tree, node_index, depth, sign, *, num_actions, config):
  """Gumbel MuZero's interior rule on the mover's completed Q (only
  interior nodes come here: the Gumbel root has `_gumbel_root_select`)."""
  del rng_key, depth
  return _gumbel_interior_slot(tree, node_index, sign, num_actions=num_actions, config=config)


def _gumbel_interior_slot(tree: mctx.Tree, node_index, sign, *, num_actions, config):
  """mctx.gumbel_muzero_interior_action_selection on the mover's completed
  Q: the visits follow softmax(logits + sigma(Q)). Padded slots (>= A) are
  left out."""
  visits = tree.children_visits[node_index, :num_actions]
  logits = tree.children_prior_logits[node_index, :num_actions]
  completed_q = _completed_mover_q(tree, node_index, sign, num_actions=num_actions, config=config)
  probs = jax.nn.softmax(logits + completed_q)
  to_argmax = probs - visits / (1 + jnp.sum(visits, keepdims=True, axis=-1))
  invalid = _interior_invalid(tree, node_index, num_actions)[:num_actions]
  return _masked_argmax(to_argmax, invalid)


def _completed_mover_q(tree: mctx.Tree, node_index, sign, *, num_actions, config):
  """mctx.qtransform_completed_by_mix_value on sign * Q over the A choice
  slots (root POV -> mover POV, as `_normalized_mover_q`): sigma(completed
  Q) `[A]`. As in mctx, the root's illegal actions take part (unvisited, they
  hold the mixed value); the padded slots (>= A) do not, so the result does
  not depend on C."""
  qvalues = sign * tree.qvalues(node_index)[:num_actions]
  visits = tree.children_visits[node_index, :num_actions]
  raw_value = sign * tree.raw_values[node_index]
  prior_probs = jax.nn.softmax(tree.children_prior_logits[node_index, :num_actions])
  if config.completed_q_use_mixed_value:
    value = _mixed_value(raw_value, qvalues, visits, prior_probs)
  else:
    value = raw_value
  completed = jnp.where(visits > 0, qvalues, value)
  if config.completed_q_rescale_values:
    low = jnp.min(completed, axis=-1, keepdims=True)
    high = jnp.max(completed, axis=-1, keepdims=True)
    completed = (completed - low) / jnp.maximum(high - low, 1e-8)
  visit_scale = float(config.completed_q_maxvisit_init) + jnp.max(visits)
  return visit_scale * float(config.completed_q_value_scale) * completed


# mctx's private Gumbel MuZero helpers (qtransforms._compute_mixed_value,
# seq_halving), copied with the same math so that the Gumbel root matches
# mctx.gumbel_muzero_policy exactly (tested against mctx's own).
def _mixed_value(raw_value, qvalues, visit_counts, prior_probs):
  """Raw value mixed with the prior-weighted Q of the visited actions."""
  sum_visit_counts = jnp.sum(visit_counts, axis=-1)
  # Non-NaN weighted Q even where visited actions have zero prior.
  prior_probs = jnp.maximum(jnp.finfo(prior_probs.dtype).tiny, prior_probs)
  sum_probs = jnp.sum(jnp.where(visit_counts > 0, prior_probs, 0.0), axis=-1)
  weighted_q = jnp.sum(
    jnp.where(
      visit_counts > 0, prior_probs * qvalues / jnp.where(visit_counts > 0, sum_probs, 1.0), 0.0
    ),
    axis=-1,
  )
  return (raw_value + sum_visit_counts * weighted_q) / (sum_visit_counts + 1)


def _score_considered(considered_visit, gumbel, logits, completed_qvalues, visit_counts):
  """gumbel + logits + sigma(Q) where visits == considered_visit, else -inf
  (-1e9 floor: an action with a finfo.min logit can still be picked alone)."""
  logits = logits - jnp.max(logits, keepdims=True, axis=-1)
  penalty = jnp.where(visit_counts == considered_visit, 0, -jnp.inf)
  return jnp.maximum(-1e9, gumbel + logits + completed_qvalues) + penalty


def _sequence_of_considered_visits(max_num_considered_actions, num_simulations):
  """Sequential halving as a visit count per simulation: simulation i goes
  to the best-scored considered action that has exactly sequence[i] visits."""
  if max_num_considered_actions <= 1:
    return tuple(range(num_simulations))
  log2max = int(math.ceil(math.log2(max_num_considered_actions)))
  sequence = []
  visits = [0] * max_num_considered_actions
  num_considered = max_num_considered_actions
  while len(sequence) < num_simulations:
    num_extra_visits = max(1, int(num_simulations / (log2max * num_considered)))
    for _ in range(num_extra_visits):
      sequence.extend(visits[:num_considered])
      for i in range(num_considered):
        visits[i] += 1
    num_considered = max(2, num_considered // 2)
  return tuple(sequence[:num_simulations])


@functools.lru_cache(maxsize=None)
def _table_of_considered_visits(max_num_considered_actions, num_simulations):
  """`[m + 1, num_simulations]`: row k is the sequence for k legal actions."""
  return tuple(
    _sequence_of_considered_visits(m, num_simulations)
    for m in range(max_num_considered_actions + 1)
  )
