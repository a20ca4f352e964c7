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
  sign, like `mctx.qtransform_by_parent_and_siblings`. A slot whose prior
  logit is the masking logit (finfo.min) is never picked: a learned model
  never gives it; the real game as the model (`alphazero.TrueModel`) masks
  the illegal moves of interior nodes with it, as the root's are.
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

Gumbel root (`config.root="gumbel"`). The root runs Gumbel MuZero's
sequential halving (`mctx.gumbel_muzero_policy`, Danihelka et al. 2022) over
Gumbel-perturbed logits of its legal actions, and every interior choice node
uses Gumbel MuZero's deterministic rule on the completed Q seen from its
mover's side (the sign rule above); chance and terminal nodes stay as
described. The move is the sequential-halving winner and the policy target
`softmax(logits + sigma(completed Q))`. No root Dirichlet noise: the Gumbel
draw is the exploration, scaled by `gumbel_scale * temperature`. With the
alternating model above it makes exactly the choices of
`mctx.gumbel_muzero_policy` with discount -1 for the same key (tested).
"""

from __future__ import annotations

import dataclasses
import functools
import math
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
_ROOTS = ("puct", "gumbel")

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
    root: "puct" (the root and every choice node use PUCT, with the root
      Dirichlet noise; the move is drawn from the visit counts) or "gumbel"
      (Gumbel MuZero, `mctx.gumbel_muzero_policy`: sequential halving over
      Gumbel-perturbed logits at the root; every interior choice node uses
      Gumbel MuZero's deterministic rule `argmax(softmax(logits + sigma(Q)) -
      visits / (1 + sum visits))` on the completed Q seen from its mover's
      side; chance and terminal nodes are unchanged). With "gumbel" the root
      Dirichlet settings and pb_c_init / pb_c_base are not used: the Gumbel
      draw is the root exploration.
    max_num_considered_actions: (gumbel) m, the actions sequential halving
      starts with (fewer where fewer are legal). Must not exceed
      num_simulations: with n < m simulations mctx visits only n of them, the
      same search as m = n, so a larger m is refused rather than truncated.
    gumbel_scale: (gumbel) scale of the root Gumbel noise; 0 makes the search
      deterministic (mctx's setting for evaluation). The noise actually used
      is `gumbel_scale * temperature` (see `ndmz_search`).
    completed_q_value_scale: (gumbel) c_scale of sigma(q) = (c_visit +
      max visits) * c_scale * q, mctx's `value_scale`.
    completed_q_maxvisit_init: (gumbel) c_visit above, mctx's `maxvisit_init`.
    completed_q_rescale_values: (gumbel) min-max rescale the completed Q to
      [0, 1] before sigma (mctx's `rescale_values`).
    completed_q_use_mixed_value: (gumbel) unvisited actions get the mixed
      value (raw value and the prior-weighted visited Q, Appendix D of the
      Gumbel MuZero paper) rather than the raw value (mctx's
      `use_mixed_value`).
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
  root: str = "puct"
  max_num_considered_actions: int = 16
  gumbel_scale: float = 1.0
  completed_q_value_scale: float = 0.1
  completed_q_maxvisit_init: float = 50.0
  completed_q_rescale_values: bool = True
  completed_q_use_mixed_value: bool = True
  identity_mode: str = "sample"
  chance_mode: str = "sample"
  terminal_nodes: bool = True
  discount: float = 1.0

  def __post_init__(self):
    if not _is_int(self.num_simulations) or self.num_simulations < 1:
      raise ValueError(f"num_simulations must be an int >= 1, got {self.num_simulations!r}")
    if self.max_depth is not None and (not _is_int(self.max_depth) or self.max_depth < 1):
      raise ValueError(f"max_depth must be None or an int >= 1, got {self.max_depth!r}")
    if self.identity_mode not in _IDENTITY_MODES:
      raise ValueError(
        f"identity_mode must be one of {_IDENTITY_MODES}, got {self.identity_mode!r}"
      )
    if self.chance_mode not in _CHANCE_MODES:
      raise ValueError(f"chance_mode must be one of {_CHANCE_MODES}, got {self.chance_mode!r}")
    self._check_number("dirichlet_alpha", 0.0, strict=True)
    if not 0.0 <= self.dirichlet_fraction <= 1.0:
      raise ValueError(f"dirichlet_fraction must be in [0, 1], got {self.dirichlet_fraction!r}")
    if not 0.0 < self.discount <= 1.0:
      raise ValueError(f"discount must be in (0, 1], got {self.discount!r}")
    self._check_number("pb_c_init", 0.0, strict=False)
    self._check_number("pb_c_base", 0.0, strict=True)
    for name in ("dirichlet_legal_only", "terminal_nodes"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
    self._check_root()

  def _check_number(self, name: str, low: float, *, strict: bool):
    """A real, finite knob above `low` (at or above it unless `strict`)."""
    value = getattr(self, name)
    ok = (
      isinstance(value, numbers.Real)
      and not isinstance(value, bool)
      and math.isfinite(value)
      and (value > low if strict else value >= low)
    )
    if not ok:
      raise ValueError(
        f"{name} must be a finite number {'>' if strict else '>='} {low}, got {value!r}"
      )

  def _check_root(self):
    """The root rule and the Gumbel knobs (checked whatever the root is, so
    a typo never waits for the day the Gumbel root is switched on)."""
    if self.root not in _ROOTS:
      raise ValueError(f"root must be one of {_ROOTS}, got {self.root!r}")
    m = self.max_num_considered_actions
    if not _is_int(m) or m < 1:
      raise ValueError(f"max_num_considered_actions must be an int >= 1, got {m!r}")
    self._check_number("gumbel_scale", 0.0, strict=False)
    self._check_number("completed_q_value_scale", 0.0, strict=True)
    self._check_number("completed_q_maxvisit_init", 0.0, strict=False)
    for name in ("completed_q_rescale_values", "completed_q_use_mixed_value"):
      if not isinstance(getattr(self, name), bool):
        raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
    if self.root == "gumbel" and m > self.num_simulations:
      raise ValueError(
        f"root 'gumbel' with num_simulations={self.num_simulations} below "
        f"max_num_considered_actions={m}: sequential halving would visit "
        f"only {self.num_simulations} of the {m} considered actions (mctx "
        "silently searches as if m were num_simulations); set "
        f"max_num_considered_actions <= {self.num_simulations} or raise "
        "num_simulations"
      )


@chex.dataclass(frozen=True)
class SearchOutput:
  """Result of `ndmz_search` for a batch of B roots.

  Attributes:
    action: `[B]` int32 player action. PUCT root: drawn from the root visit
      counts with the temperature (greedy at temperature 0). Gumbel root: the
      sequential-halving winner, the argmax of `gumbel + logits + sigma(Q)`
      over the most visited legal actions.
    action_weights: `[B, A]` the policy target. PUCT root: the root visit
      distribution over the legal actions. Gumbel root: the completed-Q
      policy `softmax(logits + sigma(completed Q))` over the legal actions
      (mctx's `action_weights`; no noise in it).
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

  legal = legal_action_mask.astype(bool)
  invalid = jnp.logical_not(legal)
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

  root_prior = _pad(add_root_noise(dirichlet_key, root.policy_logits, legal, config), num_slots)
  root_invalid = _pad(invalid.astype(root_prior.dtype), num_slots, 1.0)
  select = functools.partial(
    _select,
    num_actions=num_actions,
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

  return search_output(rng_key, tree, root.policy_logits, legal, temperature)


def search_output(
  rng_key: chex.PRNGKey,
  tree: mctx.Tree,
  prior_logits: chex.Array,
  legal: chex.Array,
  temperature: Union[float, chex.Array],
) -> SearchOutput:
  """A finished tree's `SearchOutput`: the move and its weights from the
  root's visits over the `A = legal.shape[-1]` actions (`select_action`),
  and the root's value."""
  num_actions = legal.shape[-1]
  visits = tree.children_visits[:, tree.ROOT_INDEX, :num_actions].astype(tree.node_values.dtype)
  action, action_weights = select_action(rng_key, visits, prior_logits, legal, temperature)
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
  visited legal move, ties broken by `prior_logits`, then the first."""
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

  sign = mover_sign(player, flip_opponents)
  if config.root == "gumbel":
    # Gumbel MuZero's interior rule on the mover's completed Q (only interior
    # nodes come here: the Gumbel root has `_gumbel_root_select`).
    choice_slot = _gumbel_interior_slot(
      tree, node_index, sign, num_actions=num_actions, config=config
    )
  else:
    # Choice node: mctx.muzero_action_selection on the mover's Q.
    node_visit = tree.node_visits[node_index]
    pb_c = config.pb_c_init + jnp.log((node_visit + config.pb_c_base + 1.0) / config.pb_c_base)
    policy_score = jnp.sqrt(node_visit) * pb_c * probs / (visits + 1)
    value_score = _normalized_mover_q(tree, node_index, sign)
    noise = 1e-7 * jax.random.uniform(rng_key, (tree.num_actions,))
    choice_invalid = jnp.where(
      depth == 0, tree.root_invalid_actions > 0, _interior_invalid(tree, node_index, num_actions)
    )
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
      num_actions=num_actions,
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
  completed_q = jax.vmap(
    functools.partial(_completed_mover_q, sign=1.0, num_actions=num_actions, config=config),
    in_axes=(0, None),
  )(tree, tree.ROOT_INDEX)
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


def _interior_invalid(tree: mctx.Tree, node_index, num_actions):
  """bool `[S]`: the slots an interior choice node may not pick: the padded
  ones (>= A) and those whose prior logit is the masking logit (finfo.min).
  A learned model never gives that logit; a model that knows the legal moves
  (AlphaZero's true model) masks illegal ones with it, as the root does."""
  slots = jnp.arange(tree.num_actions)
  logits = tree.children_prior_logits[node_index]
  return (slots >= num_actions) | (logits <= jnp.finfo(logits.dtype).min)


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


def _is_int(x):
  return isinstance(x, numbers.Integral) and not isinstance(x, bool)


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
