"""The NDMZ search with the PUCT root (`ndmz_search`, which hands a
`config.root="gumbel"` search to `gumbel`, and grows a `config.tree="paper"`
tree with `paper`): the root prior with Dirichlet noise, PUCT at every choice
node and the move drawn from the root's visits. See `anakin_mz.core.search`."""

from __future__ import annotations

import functools
import numbers
from typing import Union

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.core.search.backup import expectimax_root_q, with_expected_chance
from anakin_mz.core.search.config import FINAL_MOVES, PAYOFFS, SearchConfig, SearchOutput
from anakin_mz.core.search.expectimax import expectimax_search
from anakin_mz.core.search.gumbel import _gumbel_search
from anakin_mz.core.search.paper import run_paper_tree
from anakin_mz.core.search.tree import (
  _interior_invalid,
  _logits_from_probs,
  _mask_invalid_actions,
  _masked_argmax,
  _normalized_mover_q,
  _pad,
  _run_tree,
  _select,
)
from anakin_mz.core.types import ModelOutput, Params, RecurrentFn


def ndmz_search(
  params: Params,
  rng_key: chex.PRNGKey,
  root: ModelOutput,
  recurrent_fn: RecurrentFn,
  legal_action_mask: chex.Array,
  *,
  num_players: int,
  payoff: str,
  config: SearchConfig,
  temperature: Union[float, chex.Array] = 1.0,
) -> SearchOutput:
  """Runs the NDMZ search from a batch of B observed decision nodes.

  Args:
    params: forwarded to `recurrent_fn`.
    rng_key: consumed. Split like `mctx.muzero_policy` (action, Dirichlet,
      search) with the PUCT root, like `mctx.gumbel_muzero_policy` (search,
      Gumbel) with the Gumbel root.
    root: h then f at the roots. `policy_logits` `[B, A]`, `value` `[B]`
      (root mover's POV), `chance_logits` `[B, C]` (gives C), `embedding`
      `[B, ...]`. `root.reward` and `root.identity_logits` are ignored: the
      root is a choice node of relative player 0.
    recurrent_fn: g then f: `(params, rng_key, unified_action [B] int32,
      embedding) -> ModelOutput`, rewards and values in the root mover's POV,
      `identity_logits` `[B, num_players + 2]`.
    legal_action_mask: `[B, A]` bool, True where the action is legal. A row
      with no legal action gives uniform `action_weights` and action 0.
    num_players: P, the number of (choice) players of the game.
    payoff: "single", "zero_sum" or "collaborative".
    config: a `SearchConfig`.
    temperature: scalar or `[B]`. PUCT root: the action is drawn with
      probabilities proportional to `visits ** (1 / temperature)`; 0 is greedy
      (most visits, ties broken by the root prior, then the first). Gumbel
      root: it scales the root Gumbel noise, `gumbel_scale * temperature`
      (values <= 0 count as 0). By the Gumbel-max trick the actions considered
      are then drawn without replacement from `softmax(logits / temperature)`,
      the same sharpening temperature means for the PUCT root; 1 is
      `mctx.gumbel_muzero_policy` exactly, 0 is its deterministic evaluation
      setting (`gumbel_scale=0`): every move is then greedy.

  Returns:
    A `SearchOutput`.
  """
  if payoff not in PAYOFFS:
    raise ValueError(f"payoff must be one of {PAYOFFS}, got {payoff!r}")
  if not isinstance(num_players, numbers.Integral) or num_players < 1:
    raise ValueError(f"num_players must be an int >= 1, got {num_players!r}")
  if payoff == "single" and num_players != 1:
    raise ValueError(f"payoff 'single' needs num_players == 1, got {num_players}")
  if root.policy_logits.ndim != 2:
    raise ValueError(f"root.policy_logits must be [B, A], got shape {root.policy_logits.shape}")
  batch_size, num_actions = root.policy_logits.shape
  if root.chance_logits.ndim != 2 or root.chance_logits.shape[0] != batch_size:
    raise ValueError(
      f"root.chance_logits must be [B={batch_size}, C], got shape {root.chance_logits.shape}"
    )
  num_outcomes = root.chance_logits.shape[1]
  if root.value.shape != (batch_size,):
    raise ValueError(f"root.value must be [B={batch_size}], got shape {root.value.shape}")
  if legal_action_mask.shape != (batch_size, num_actions):
    raise ValueError(
      f"legal_action_mask must be [B={batch_size}, A={num_actions}] like "
      f"root.policy_logits, got shape {legal_action_mask.shape}"
    )
  # The rest as mctx checks its root (trace time only: no cost when it runs).
  chex.assert_tree_shape_prefix(
    root.embedding, (batch_size,), custom_message="root.embedding must be [B, ...]"
  )
  _check_temperature(temperature, batch_size)
  num_players = int(num_players)
  num_slots = max(num_actions, num_outcomes)
  flip_opponents = payoff == "zero_sum"

  legal = legal_action_mask.astype(bool)
  invalid = jnp.logical_not(legal)
  if config.root == "expectimax":
    return expectimax_search(
      params,
      rng_key,
      root,
      recurrent_fn,
      legal,
      num_players=num_players,
      flip_opponents=flip_opponents,
      config=config,
    )
  if config.root == "gumbel":
    return _gumbel_search(
      params,
      rng_key,
      root,
      recurrent_fn,
      legal,
      num_actions=num_actions,
      num_outcomes=num_outcomes,
      num_slots=num_slots,
      num_players=num_players,
      flip_opponents=flip_opponents,
      config=config,
      temperature=temperature,
    )
  rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)

  if config.tree == "paper":  # an identity node has P + 2 children
    num_slots = max(num_slots, num_players + 2)
  root_prior = _pad(add_root_noise(dirichlet_key, root.policy_logits, legal, config), num_slots)
  root_invalid = _pad(invalid.astype(root_prior.dtype), num_slots, 1.0)
  if config.tree == "paper":
    tree = run_paper_tree(
      params,
      search_key,
      root,
      recurrent_fn,
      root_prior=root_prior,
      root_invalid=root_invalid,
      choice=functools.partial(_puct_slot, num_actions=num_actions, config=config),
      num_actions=num_actions,
      num_outcomes=num_outcomes,
      num_slots=num_slots,
      num_players=num_players,
      flip_opponents=flip_opponents,
      config=config,
    )
    return search_output(rng_key, tree, root.policy_logits, legal, temperature)
  select = functools.partial(
    _select,
    choice=functools.partial(_puct_slot, num_actions=num_actions, config=config),
    num_outcomes=num_outcomes,
    flip_opponents=flip_opponents,
    config=config,
  )
  tree = _run_tree(
    params,
    search_key,
    root,
    recurrent_fn,
    root_prior=root_prior,
    root_invalid=root_invalid,
    root_select=functools.partial(select, depth=0),
    interior_select=select,
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    num_slots=num_slots,
    num_players=num_players,
    config=config,
  )

  return search_output(
    rng_key,
    tree,
    root.policy_logits,
    legal,
    temperature,
    final_move=config.final_move,
    num_outcomes=num_outcomes,
    flip_opponents=flip_opponents,
    backup=config.backup,
  )


def _puct_slot(rng_key, tree: mctx.Tree, node_index, depth, sign, *, num_actions, config):
  """The PUCT choice: mctx.muzero_action_selection on the mover's Q (`sign`
  turns root-mover values into the mover's); the root's own invalid
  actions at depth 0."""
  visits = tree.children_visits[node_index]
  probs = jax.nn.softmax(tree.children_prior_logits[node_index])
  node_visit = tree.node_visits[node_index]
  pb_c = config.pb_c_init + jnp.log((node_visit + config.pb_c_base + 1.0) / config.pb_c_base)
  policy_score = jnp.sqrt(node_visit) * pb_c * probs / (visits + 1)
  value_score = _normalized_mover_q(tree, node_index, sign, config.value_bounds)
  noise = 1e-7 * jax.random.uniform(rng_key, (tree.num_actions,))
  choice_invalid = jnp.where(
    depth == 0, tree.root_invalid_actions > 0, _interior_invalid(tree, node_index, num_actions)
  )
  return _masked_argmax(value_score + policy_score + noise, choice_invalid)


def search_output(
  rng_key: chex.PRNGKey,
  tree: mctx.Tree,
  prior_logits: chex.Array,
  legal: chex.Array,
  temperature: Union[float, chex.Array],
  *,
  final_move: str = "visits",
  num_outcomes: int = 1,
  flip_opponents: bool = False,
  backup: str = "mean",
) -> SearchOutput:
  """A finished tree's `SearchOutput`: the move and its weights from the
  root's visits over the `A = legal.shape[-1]` actions (`select_action`),
  and the root's value. With `final_move` "q" or "expectimax" the greedy
  move (temperature 0) is the visited legal move of highest root Q, or of
  highest expectimax backup (`backup.expectimax_root_q` of an NDMZ tree
  with `num_outcomes` chance outcomes, `flip_opponents` in zero-sum games;
  `SearchConfig.final_move`); "q" reads the root Q of `backup`
  (`SearchConfig.backup`)."""
  chex.assert_rank(legal, 2, custom_message="legal must be [B, A]")
  chex.assert_equal_shape([prior_logits, legal], custom_message="prior_logits vs legal [B, A]")
  num_actions = legal.shape[-1]
  visits = tree.children_visits[:, tree.ROOT_INDEX, :num_actions].astype(tree.node_values.dtype)
  action, action_weights = select_action(rng_key, visits, prior_logits, legal, temperature)
  if final_move in ("q", "expectimax"):
    # Root Q is the root mover's own (the tree's values are its POV).
    if final_move == "q":
      q_tree = tree
      if backup == "expectation":
        q_tree = with_expected_chance(tree, num_actions=num_actions, num_outcomes=num_outcomes)
      q = q_tree.qvalues(jnp.full((legal.shape[0],), tree.ROOT_INDEX))[:, :num_actions]
    else:
      q = expectimax_root_q(
        tree, num_actions=num_actions, num_outcomes=num_outcomes, flip_opponents=flip_opponents
      )
    by_q = _greedy_by_q(q, visits, legal)
    temperature_b = jnp.broadcast_to(jnp.asarray(temperature), action.shape)
    action = jnp.where(temperature_b > 0, action, by_q).astype(jnp.int32)
  elif final_move != "visits":
    raise ValueError(f"final_move must be one of {FINAL_MOVES}, got {final_move!r}")
  return SearchOutput(
    action=action,
    action_weights=action_weights,
    root_value=tree.node_values[:, tree.ROOT_INDEX],
    search_tree=tree,
  )


def add_root_noise(
  rng_key: chex.PRNGKey, policy_logits: chex.Array, legal: chex.Array, config: SearchConfig
) -> chex.Array:
  """The PUCT root's prior logits `[B, A]`: the policy mixed with Dirichlet
  noise as `mctx.muzero_policy` mixes it (over the legal moves only with
  `config.dirichlet_legal_only`), illegal moves at the masking logit."""
  chex.assert_rank(policy_logits, 2, custom_message="policy_logits must be [B, A]")
  chex.assert_equal_shape([policy_logits, legal], custom_message="policy_logits vs legal [B, A]")
  probs = jax.nn.softmax(policy_logits)
  if config.dirichlet_fraction > 0:  # (skipping it saves compile time only)
    probs = _add_dirichlet_noise(
      rng_key,
      probs,
      dirichlet_alpha=float(config.dirichlet_alpha),
      dirichlet_fraction=float(config.dirichlet_fraction),
      legal=legal if config.dirichlet_legal_only else None,
    )
  return _mask_invalid_actions(_logits_from_probs(probs), jnp.logical_not(legal))


def select_action(
  rng_key: chex.PRNGKey,
  visits: chex.Array,
  prior_logits: chex.Array,
  legal: chex.Array,
  temperature: Union[float, chex.Array],
):
  """The PUCT root's move from its visit counts `visits` `[B, A]`: (action
  `[B]` int32, action_weights `[B, A]`). The weights are the visit
  distribution over the legal moves (uniform over them where nothing was
  visited, over all moves where none is legal); the move is drawn with
  probabilities `weights ** (1 / temperature)`, or at temperature 0 the most
  visited legal move, ties broken by `prior_logits`, then the first.
  `prior_logits` and `legal` are `[B, A]` like `visits`; `temperature` is a
  scalar or `[B]`."""
  chex.assert_rank(visits, 2, custom_message="visits must be [B, A]")
  chex.assert_equal_shape(
    [visits, prior_logits, legal], custom_message="visits, prior_logits, legal [B, A]"
  )
  _check_temperature(temperature, visits.shape[0])
  visits = jnp.where(legal, visits, 0)
  total = jnp.sum(visits, axis=-1, keepdims=True)
  any_legal = jnp.any(legal, axis=-1, keepdims=True)
  fallback = jnp.where(any_legal, legal, True).astype(visits.dtype)
  fallback = fallback / jnp.sum(fallback, axis=-1, keepdims=True)
  action_weights = jnp.where(total > 0, visits / jnp.maximum(total, 1), fallback)

  temperature = jnp.asarray(temperature, dtype=action_weights.dtype)
  sampled = jax.random.categorical(
    rng_key, _apply_temperature(_logits_from_probs(action_weights), temperature[..., None])
  )
  greedy = _greedy(action_weights, prior_logits, legal)
  action = jnp.where(temperature > 0, sampled, greedy).astype(jnp.int32)
  return action, action_weights


def _check_temperature(temperature, batch_size: int) -> None:
  """A temperature is a scalar or one per root, `[B]`: a `[B, 1]` would
  broadcast the move's draw to `[B, B]`."""
  shape = jnp.shape(temperature)
  if shape not in ((), (batch_size,)):
    chex.assert_shape(
      temperature, (batch_size,), custom_message="temperature must be a scalar or [B]"
    )


def _greedy_by_q(q, visits, legal):
  """`[B]`: the visited legal move of highest `q` `[B, A]`, ties by visits,
  then the first; the most visited legal move where none was visited."""
  visited = legal & (visits > 0)
  best_q = jnp.max(jnp.where(visited, q, -jnp.inf), axis=-1, keepdims=True)
  top = visited & (q >= best_q)
  score = jnp.where(top, visits, -1.0)
  fallback = jnp.argmax(jnp.where(legal, visits, -1.0), axis=-1)
  return jnp.where(jnp.any(visited, axis=-1), jnp.argmax(score, axis=-1), fallback)


def _greedy(action_weights, prior_logits, legal):
  """Most visited legal action; ties by the prior, then the first."""
  best = action_weights >= jnp.max(action_weights, axis=-1, keepdims=True)
  score = jnp.where(best & legal, prior_logits, -jnp.inf)
  score = jnp.where(
    jnp.any(best & legal, axis=-1, keepdims=True), score, jnp.where(best, 0.0, -jnp.inf)
  )
  return jnp.argmax(score, axis=-1)


# mctx.muzero_policy's private helpers (same math), the noise helper with
# the legal-only (AlphaZero) draw too.
def _add_dirichlet_noise(rng_key, probs, *, dirichlet_alpha, dirichlet_fraction, legal=None):
  batch_size, num_actions = probs.shape
  noise = jax.random.dirichlet(
    rng_key, alpha=jnp.full([num_actions], fill_value=dirichlet_alpha), shape=(batch_size,)
  )
  if legal is not None:  # restrict to the legal actions and renormalise
    noise = jnp.where(legal, noise, 0.0)
    total = jnp.sum(noise, axis=-1, keepdims=True)
    uniform = legal / jnp.maximum(jnp.sum(legal, axis=-1, keepdims=True), 1)
    noise = jnp.where(total > 0, noise / jnp.maximum(total, 1e-30), uniform)
  return (1 - dirichlet_fraction) * probs + dirichlet_fraction * noise


def _apply_temperature(logits, temperature):
  logits = logits - jnp.max(logits, keepdims=True, axis=-1)
  return logits / jnp.maximum(jnp.finfo(logits.dtype).tiny, temperature)
