"""Nondeterministic MuZero (NDMZ) tree search, built on `mctx.search`.

The tree is mctx's own: no fork. What NDMZ adds lives in two places:

* The embedding stored in every node is wrapped in `_Node`, which also holds
  the node's *kind* (choice, chance or terminal) and, for a choice node, its
  *relative player* (0 = the root mover).
* Custom root/interior action selection functions read the kind and pick a
  child: PUCT at choice nodes, a draw from the chance policy at chance nodes.

Slots. mctx gives every node the same number of child slots; we use
`S = max(A, C)` (A choice actions, C chance outcomes). At a choice node slot
`a` is player action `a` (slots `>= A` are masked); at a chance node slot `c` is
chance outcome `c` (slots `>= C` masked). The recurrent wrapper turns the slot
into the *unified* action of `anakin_mz.types` (`a`, or `A + c`) before calling
the user's `recurrent_fn` (g then f).

Node kinds. The root is a choice node of relative player 0, with the real legal
mask and Dirichlet noise mixed in as in `mctx.muzero_policy`. Every expansion
reads the identity head of the new state: sampled (the NDMZ paper's roulette
wheel, `identity_mode="sample"`) or argmax (the thesis, `"argmax"`). The class
decides the node's kind once, when it is created:

* choice node of relative player r: children priors = choice policy, children
  chosen by PUCT (the MuZero formula of `mctx.muzero_action_selection`,
  pb_c_init / pb_c_base) on Q seen from the mover's side. In a zero-sum game
  the mover's Q is the negated root-POV Q when r != 0 (with more than two
  players every other player counts as the root mover's opponent); in
  single-player and collaborative games it is the root-POV Q. The Q-values are
  min-max normalised over the node value and its children's Q-values after the
  sign, like `mctx.qtransform_by_parent_and_siblings`.
* chance node: children priors = chance policy; a child is drawn from them
  (`chance_mode="sample"`) or chosen by the deterministic rule
  `argmax(prob - visits / (1 + sum visits))` (`"prior_minus_visits"`).
* terminal node (`terminal_nodes=True`, thesis IV-C 2): not expanded further.
  Its value is 0 and anything mctx grows below it has reward 0 and value 0 (the
  wrapper does not use the model there), so what backs up through a terminal
  node is exactly the predicted reward of the transition into it. With
  `terminal_nodes=False` the terminal class is ignored (the kind is decided
  among the other classes) and the search runs past predicted ends, as MuZero.

Point of view. Every value and reward stored in the tree (`node_values`,
`raw_values`, `children_values`, `children_rewards`, `SearchOutput.root_value`)
is from the point of view of the *root mover*, with the same discount
`config.discount` (+1 by default, never negative) on every edge:
`Q(s, a) = r(s, a) + discount * V(child)`, all root-mover POV. Turn order is
never hard-coded: it lives in the per-node relative player, so no discount of -1 is
needed. With a model that strictly alternates two players and never predicts
chance or terminal, this search makes exactly the choices of
`mctx.muzero_policy` with discount -1 (tested).
"""

from __future__ import annotations

import dataclasses
import functools
import numbers
from typing import Optional, Union

import chex
import jax
import jax.numpy as jnp
import mctx

from anakin_mz.types import ModelOutput, Params, RecurrentFn

_PAYOFFS = ("single", "zero_sum", "collaborative")
_IDENTITY_MODES = ("sample", "argmax")
_CHANCE_MODES = ("sample", "prior_minus_visits")

# Node kinds stored in `_Node.kind`.
_CHOICE = 0
_CHANCE = 1
_TERMINAL = 2


@dataclasses.dataclass(frozen=True)
class SearchConfig:
  """Static settings of the NDMZ search (hashable: usable as a static arg).

  Attributes:
    num_simulations: simulations per search (each expands one node).
    max_depth: maximum tree depth in edges (None: num_simulations). As in
      mctx, a simulation that hits the limit re-evaluates the node there
      (with identity_mode="sample" its kind is drawn again).
    dirichlet_alpha: concentration of the root Dirichlet noise.
    dirichlet_fraction: weight of the noise in the root prior (0 disables it).
    dirichlet_legal_only: draw the noise over the legal actions only
      (AlphaZero), so its whole weight lands on moves the root can make. False
      draws it over all A actions as `mctx.muzero_policy` does; where few of
      many actions are legal (Carchess: 4 of 100) most of it is then masked
      away. (A Dirichlet draw restricted to a subset and renormalised is the
      Dirichlet of that subset, so True is exact AlphaZero noise.)
    pb_c_init: c_1 of the MuZero PUCT formula.
    pb_c_base: c_2 of the MuZero PUCT formula.
    identity_mode: "sample" (roulette wheel on the identity head, the NDMZ
      paper) or "argmax" (the thesis).
    chance_mode: "sample" (draw the child from the chance policy) or
      "prior_minus_visits" (deterministic: argmax of prob - visit share).
    terminal_nodes: predicted-terminal nodes are not expanded further.
    discount: per-edge discount of the tree, `Q(s, a) = r + discount * V`:
      it must be the discount of the value targets the model learned
      (`Config` sets it from its one `discount`). Below 1 it makes quick
      wins worth more than slow ones, which separates the moves of a side
      that wins (or loses) in every line.
  """

  num_simulations: int = 50
  max_depth: Optional[int] = None
  dirichlet_alpha: float = 0.3
  dirichlet_fraction: float = 0.25
  dirichlet_legal_only: bool = False
  pb_c_init: float = 1.25
  pb_c_base: float = 19652.0
  identity_mode: str = "sample"
  chance_mode: str = "sample"
  terminal_nodes: bool = True
  discount: float = 1.0

  def __post_init__(self):
    if not isinstance(self.num_simulations, int) or self.num_simulations < 1:
      raise ValueError(f"num_simulations must be an int >= 1, got {self.num_simulations!r}")
    if self.max_depth is not None and (not isinstance(self.max_depth, int) or self.max_depth < 1):
      raise ValueError(f"max_depth must be None or an int >= 1, got {self.max_depth!r}")
    if self.identity_mode not in _IDENTITY_MODES:
      raise ValueError(
        f"identity_mode must be one of {_IDENTITY_MODES}, got {self.identity_mode!r}"
      )
    if self.chance_mode not in _CHANCE_MODES:
      raise ValueError(f"chance_mode must be one of {_CHANCE_MODES}, got {self.chance_mode!r}")
    if not self.dirichlet_alpha > 0:
      raise ValueError(f"dirichlet_alpha must be > 0, got {self.dirichlet_alpha!r}")
    if not 0.0 <= self.dirichlet_fraction <= 1.0:
      raise ValueError(f"dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction!r}")
    if not 0.0 < self.discount <= 1.0:
      raise ValueError(f"discount must be in (0, 1], got {self.discount!r}")
    if not self.pb_c_base > 0:
      raise ValueError(f"pb_c_base must be > 0, got {self.pb_c_base!r}")


@chex.dataclass(frozen=True)
class SearchOutput:
  """Result of `ndmz_search` for a batch of B roots.

  Attributes:
    action: `[B]` int32 player action, drawn from the root visit counts with
      the temperature (greedy at temperature 0).
    action_weights: `[B, A]` root visit distribution over the legal actions
      (the policy target).
    root_value: `[B]` search value of the root, root mover's POV.
    search_tree: the `mctx.Tree`, `S = max(A, C)` slots per node, all values
      root mover's POV with discount `config.discount`.
      `search_tree.embeddings` is a `_Node` with fields `embedding` (the
      user's), `kind` `[B, N]` (0 choice, 1 chance, 2 terminal) and `player`
      `[B, N]` (relative player of choice nodes, 0 otherwise).
  """

  action: chex.Array
  action_weights: chex.Array
  root_value: chex.Array
  search_tree: mctx.Tree


@chex.dataclass(frozen=True)
class _Node:
  """What the tree stores per node: the user's embedding plus the NDMZ flags."""

  embedding: chex.ArrayTree
  kind: chex.Array  # [B] int32: _CHOICE, _CHANCE or _TERMINAL
  player: chex.Array  # [B] int32: relative player of a choice node, else 0


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
      search).
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
    temperature: scalar or `[B]`; the action is drawn with probabilities
      proportional to `visits ** (1 / temperature)`; 0 is greedy (most visits,
      ties broken by the root prior, then the first).

  Returns:
    A `SearchOutput`.
  """
  if payoff not in _PAYOFFS:
    raise ValueError(f"payoff must be one of {_PAYOFFS}, got {payoff!r}")
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
  num_players = int(num_players)
  num_slots = max(num_actions, num_outcomes)
  flip_opponents = payoff == "zero_sum"

  rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)
  legal = legal_action_mask.astype(bool)
  invalid = jnp.logical_not(legal)

  # Root prior: the same noise scheme as mctx.muzero_policy, then padded.
  probs = jax.nn.softmax(root.policy_logits)
  if config.dirichlet_fraction > 0:  # (skipping it saves compile time only)
    probs = _add_dirichlet_noise(
      dirichlet_key,
      probs,
      dirichlet_alpha=float(config.dirichlet_alpha),
      dirichlet_fraction=float(config.dirichlet_fraction),
      legal=legal if config.dirichlet_legal_only else None,
    )
  noisy_logits = _logits_from_probs(probs)
  root_prior = _pad(_mask_invalid_actions(noisy_logits, invalid), num_slots)
  root_invalid = _pad(invalid.astype(root_prior.dtype), num_slots, 1.0)
  zeros_b = jnp.zeros((batch_size,), jnp.int32)
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
  select = functools.partial(
    _select,
    num_actions=num_actions,
    num_outcomes=num_outcomes,
    flip_opponents=flip_opponents,
    config=config,
  )
  tree = mctx.search(
    params=params,
    rng_key=search_key,
    root=mctx_root,
    recurrent_fn=wrapped_recurrent_fn,
    root_action_selection_fn=functools.partial(select, depth=0),
    interior_action_selection_fn=select,
    num_simulations=config.num_simulations,
    max_depth=config.max_depth,
    invalid_actions=root_invalid,
  )

  visits = tree.children_visits[:, tree.ROOT_INDEX, :num_actions]
  visits = jnp.where(legal, visits, 0).astype(root.value.dtype)
  total = jnp.sum(visits, axis=-1, keepdims=True)
  any_legal = jnp.any(legal, axis=-1, keepdims=True)
  fallback = jnp.where(any_legal, legal, True).astype(visits.dtype)
  fallback = fallback / jnp.sum(fallback, axis=-1, keepdims=True)
  action_weights = jnp.where(total > 0, visits / jnp.maximum(total, 1), fallback)

  temperature = jnp.asarray(temperature, dtype=action_weights.dtype)
  sampled = jax.random.categorical(
    rng_key, _apply_temperature(_logits_from_probs(action_weights), temperature[..., None])
  )
  greedy = _greedy(action_weights, root.policy_logits, legal)
  action = jnp.where(temperature > 0, sampled, greedy).astype(jnp.int32)
  return SearchOutput(
    action=action,
    action_weights=action_weights,
    root_value=tree.node_values[:, tree.ROOT_INDEX],
    search_tree=tree,
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
  for name, shape in (
    ("reward", (batch_size,)),
    ("value", (batch_size,)),
    ("policy_logits", (batch_size, num_actions)),
    ("chance_logits", (batch_size, num_outcomes)),
    ("identity_logits", (batch_size, num_players + 2)),
  ):
    chex.assert_shape(getattr(out, name), shape, custom_message=f"recurrent_fn output {name}")
  chex.assert_trees_all_equal_shapes_and_dtypes(
    out.embedding, node.embedding, custom_message="recurrent_fn embedding vs the root embedding"
  )

  logits = out.identity_logits
  if not config.terminal_nodes:
    logits = logits.at[:, num_players + 1].set(-jnp.inf)
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


def _select(
  rng_key, tree: mctx.Tree, node_index, depth, *, num_actions, num_outcomes, flip_opponents, config
):
  """Action (slot) selection at one node of an unbatched tree."""
  kind = tree.embeddings.kind[node_index]
  player = tree.embeddings.player[node_index]
  slots = jnp.arange(tree.num_actions)
  visits = tree.children_visits[node_index]
  probs = jax.nn.softmax(tree.children_prior_logits[node_index])

  # Choice node: mctx.muzero_action_selection on the mover's Q.
  node_visit = tree.node_visits[node_index]
  pb_c = config.pb_c_init + jnp.log((node_visit + config.pb_c_base + 1.0) / config.pb_c_base)
  policy_score = jnp.sqrt(node_visit) * pb_c * probs / (visits + 1)
  sign = mover_sign(player, flip_opponents)
  value_score = _normalized_mover_q(tree, node_index, sign)
  noise = 1e-7 * jax.random.uniform(rng_key, (tree.num_actions,))
  choice_invalid = jnp.where(depth == 0, tree.root_invalid_actions > 0, slots >= num_actions)
  choice_slot = _masked_argmax(value_score + policy_score + noise, choice_invalid)

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


def _normalized_mover_q(tree: mctx.Tree, node_index, sign):
  """qtransform_by_parent_and_siblings on sign * Q (root POV -> mover POV)."""
  qvalues = sign * tree.qvalues(node_index)
  visits = tree.children_visits[node_index]
  node_value = sign * tree.node_values[node_index]
  safe_qvalues = jnp.where(visits > 0, qvalues, node_value)
  min_value = jnp.minimum(node_value, jnp.min(safe_qvalues, axis=-1))
  max_value = jnp.maximum(node_value, jnp.max(safe_qvalues, axis=-1))
  completed_by_min = jnp.where(visits > 0, qvalues, min_value)
  return (completed_by_min - min_value) / jnp.maximum(max_value - min_value, 1e-8)


def _masked_argmax(to_argmax, invalid):
  return jnp.argmax(jnp.where(invalid, -jnp.inf, to_argmax)).astype(jnp.int32)


def _greedy(action_weights, prior_logits, legal):
  """Most visited legal action; ties by the prior, then the first."""
  best = action_weights >= jnp.max(action_weights, axis=-1, keepdims=True)
  score = jnp.where(best & legal, prior_logits, -jnp.inf)
  score = jnp.where(
    jnp.any(best & legal, axis=-1, keepdims=True), score, jnp.where(best, 0.0, -jnp.inf)
  )
  return jnp.argmax(score, axis=-1)


def _pad(x, num_slots, fill=None):
  """Pads the last axis of `x` to `num_slots` (default fill: min logit)."""
  extra = num_slots - x.shape[-1]
  if extra == 0:
    return x
  if fill is None:
    fill = jnp.finfo(x.dtype).min
  return jnp.concatenate([x, jnp.full(x.shape[:-1] + (extra,), fill, x.dtype)], axis=-1)


# The four helpers below copy mctx.muzero_policy's private helpers (same math)
# so that the root prior and the action match it exactly; the noise helper
# also offers the legal-only (AlphaZero) draw.
def _mask_invalid_actions(logits, invalid_actions):
  logits = logits - jnp.max(logits, axis=-1, keepdims=True)
  return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def _logits_from_probs(probs):
  return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


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
