"""The NDMZ search without a tree (`config.root="expectimax"`): a
full-width expectimax of `config.expectimax_depth` moves on the learned
model, its nodes NDMZ's (choice, chance, terminal, read from the identity
head by argmax). See `anakin_mz.core.search`.

Why: on Nannon 6-3-6 the value head searched two moves deep on the *real*
game plays above one move deep (0.4974 and 0.4979 against 0.4955 and
0.4964 exact, docs/results/planning.md E9), while a 16-simulation tree on the
real game with the same network plays below one move (0.4929, 0.4922): the
tree's sampled dice and mean backups lose what the values know. This search
keeps the values and drops the sampling: every chance outcome is averaged
by the chance policy, every choice node takes its mover's best move.

The rules, all values from the root mover's view (`Q = r + discount * V`,
as in the tree):

* the root tries its `expectimax_width` legal moves of highest prior (all
  of them where fewer are legal);
* a node's kind is the identity head's argmax (the terminal class ignored
  with `terminal_nodes` off); a terminal node is worth 0, so its edge
  counts its predicted reward alone;
* a chance node is worth the chance policy's expectation of `r_c +
  discount * V(child)` over its `expectimax_chance_width` most likely
  outcomes (all C by default), their probabilities renormalised: exact
  where the rest have none (a die of 6 in Nannon's 16 outcome slots, the
  other 10 its opening rolls); a chance child that is itself a chance node
  stops at its value head (as `lookahead.node_values`); with
  `expectimax_afterstate` a chance node with no moves left below it stops
  at its value head too (the afterstate value);
* a choice node with moves left is worth its mover's best (`mover_sign`:
  the root mover's opponent in a zero-sum game minimises) over its
  `expectimax_width` actions of highest prior, those of prior probability
  below `expectimax_min_prior` left out (the first always kept): a learned
  model has no legal mask below the root, and its prior puts almost no
  mass on the moves its targets never held. With no moves left it is
  worth its value head.

`expectimax_depth=1` is the planning diagnosis's `model_chance` player:
each legal move valued by the die one step deeper (tested equal); with
`expectimax_afterstate` its `model_1ply` (tested equal). Cost per
root: about `W * (C + W * C)` model calls at depth 2 (`W` the width, `C`
the chance width), in one batched call per level; no simulations.

The move is the legal move of highest Q (the first of equals; action 0
where none is legal); the policy target is its one-hot and the root value
its Q, as TD(lambda)'s expectimax (`search_tree` None). Temperature, the
root noise and the tree's settings are not read: it is a play-time search
(`play_search`), and `Config` refuses it in the training `search`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from anakin_mz.core.search.config import SearchOutput
from anakin_mz.core.search.tree import identity_logits, mover_sign
from anakin_mz.core.types import ModelOutput


def expectimax_search(
  params,
  rng_key,
  root: ModelOutput,
  recurrent_fn,
  legal,
  *,
  num_players,
  flip_opponents,
  config,
) -> SearchOutput:
  """`ndmz_search` with `config.root="expectimax"` (the module's search)."""
  q = chunked_action_values(
    params,
    rng_key,
    root,
    recurrent_fn,
    legal,
    num_players=num_players,
    flip_opponents=flip_opponents,
    config=config,
  )
  num_actions = q.shape[-1]
  action = jnp.argmax(q, axis=-1).astype(jnp.int32)  # all -inf: action 0
  any_legal = jnp.any(legal, axis=-1)
  return SearchOutput(
    action=action,
    action_weights=jax.nn.one_hot(action, num_actions, dtype=jnp.float32),
    root_value=jnp.where(any_legal, jnp.max(q, axis=-1), 0.0),
    search_tree=None,
  )


# Model calls on the deepest level of one chunk of roots: bounds the memory
# (about 1 GiB of activations for Nannon's MLP) whatever the batch.
LEAF_BUDGET = 1 << 19


def chunked_action_values(params, rng_key, root: ModelOutput, recurrent_fn, legal, **kw):
  """`action_values` on chunks of roots in one `lax.map`, each chunk's
  deepest level at most `LEAF_BUDGET` model calls (one chunk when the batch
  fits; the last chunk padded with copies of the last root)."""
  batch, num_actions = root.policy_logits.shape
  config = kw["config"]
  width = _width(config.expectimax_width, num_actions)
  outcomes = _width(config.expectimax_chance_width, root.chance_logits.shape[-1])
  leaves = (width * outcomes) ** config.expectimax_depth  # a move and an outcome per level
  chunk = max(1, LEAF_BUDGET // leaves)
  if batch <= chunk:
    return action_values(params, rng_key, root, recurrent_fn, legal, **kw)
  chunks = -(-batch // chunk)

  def split(x):
    x = jnp.concatenate([x, jnp.repeat(x[-1:], chunks * chunk - batch, axis=0)])
    return x.reshape((chunks, chunk) + x.shape[1:])

  q = jax.lax.map(
    lambda xs: action_values(params, rng_key, xs[0], recurrent_fn, xs[1], **kw),
    jax.tree.map(split, (root, legal)),
  )
  return q.reshape((chunks * chunk, num_actions))[:batch]


def action_values(
  params,
  rng_key,
  root: ModelOutput,
  recurrent_fn,
  legal,
  *,
  num_players,
  flip_opponents,
  config,
):
  """`[B, A]` float32: each root move's expectimax Q (root mover's view),
  `-inf` where the move is illegal or not among the root's
  `config.expectimax_width` tried moves.

  Args:
    params, rng_key: forwarded to `recurrent_fn` (one key per level).
    root: h then f at the roots (`policy_logits` `[B, A]`, `embedding`).
    recurrent_fn: g then f, as `ndmz_search` takes it.
    legal: `[B, A]` bool legal mask of the roots.
    num_players: P; identity class P is chance, P + 1 terminal.
    flip_opponents: zero-sum: the root mover's opponents minimise.
    config: the `SearchConfig` (`expectimax_depth`, `expectimax_width`,
      `expectimax_chance_width`, `expectimax_min_prior`, `discount`,
      `terminal_nodes`).
  """
  batch, num_actions = root.policy_logits.shape
  width = _width(config.expectimax_width, num_actions)
  rule = _Rule(
    params=params,
    recurrent_fn=recurrent_fn,
    num_actions=num_actions,
    num_players=num_players,
    flip_opponents=flip_opponents,
    width=width,
    config=config,
  )
  logits = jnp.where(legal, root.policy_logits, -jnp.inf)
  _, slots = jax.lax.top_k(logits, width)  # [B, W], legal ones first
  tried = jnp.take_along_axis(legal, slots, axis=-1)
  q = rule.edges(rng_key, root.embedding, slots, config.expectimax_depth - 1)  # [B, W]
  q = jnp.where(tried, q, -jnp.inf)
  out = jnp.full((batch, num_actions), -jnp.inf, q.dtype)
  return out.at[jnp.arange(batch)[:, None], slots].max(q)


def _width(setting, available: int) -> int:
  """The moves or outcomes a node tries: `setting` (None: all) capped at
  the `available` ones."""
  return min(setting or available, available)


class _Rule:
  """The module's rules on a flat batch of nodes, one model call per level."""

  def __init__(
    self, *, params, recurrent_fn, num_actions, num_players, flip_opponents, width, config
  ):
    self.params = params
    self.recurrent_fn = recurrent_fn
    self.num_actions = num_actions
    self.num_players = num_players
    self.flip_opponents = flip_opponents
    self.width = width
    self.config = config

  def edges(self, key, embedding, unified, moves, *, chance=True):
    """`[N, K]`: `r + discount * V(child)` of the unified actions `unified`
    `[N, K]` from the nodes `embedding` `[N, ...]`, the children valued
    with `moves` moves left (a child that is a chance node stops at its
    value head unless `chance`)."""
    n, k = unified.shape
    key, child_key = jax.random.split(key)
    repeated = jax.tree.map(functools.partial(jnp.repeat, repeats=k, axis=0), embedding)
    kids = self.recurrent_fn(self.params, key, unified.reshape(-1).astype(jnp.int32), repeated)
    value = self.value(child_key, kids, moves, chance=chance)
    return (kids.reward + self.config.discount * value).reshape(n, k)

  def value(self, key, out: ModelOutput, moves, *, chance):
    """`[N]`: the value of the nodes the model output `out` `[N]` predicts
    (chance nodes averaged one step deeper where `chance`)."""
    logits = identity_logits(out, self.num_players, terminal_nodes=self.config.terminal_nodes)
    identity = jnp.argmax(logits, axis=-1)
    choice_key, chance_key = jax.random.split(key)
    choice = out.value if moves == 0 else self.best(choice_key, out, identity, moves)
    # A chance node is averaged one step deeper, or (a chance node's chance
    # child, or an afterstate with no moves left) stops at its value head.
    stop = not chance or (moves == 0 and self.config.expectimax_afterstate)
    deeper = out.value if stop else self.expected(chance_key, out, moves)
    value = jnp.where(identity == self.num_players, deeper, choice)
    return jnp.where(identity == self.num_players + 1, 0.0, value)

  def expected(self, key, out: ModelOutput, moves):
    """`[N]`: the chance policy's expectation over its most likely
    outcomes (renormalised)."""
    k = _width(self.config.expectimax_chance_width, out.chance_logits.shape[-1])
    probs, outcomes = jax.lax.top_k(jax.nn.softmax(out.chance_logits, axis=-1), k)
    kids = self.edges(key, out.embedding, self.num_actions + outcomes, moves, chance=False)
    return jnp.sum(probs * kids, axis=-1) / jnp.sum(probs, axis=-1)

  def best(self, key, out: ModelOutput, identity, moves):
    """`[N]`: a choice node's mover's best over its widest-prior actions."""
    probs = jax.nn.softmax(out.policy_logits, axis=-1)
    top, slots = jax.lax.top_k(probs, self.width)  # [N, W], descending
    keep = (top >= self.config.expectimax_min_prior).at[:, 0].set(True)
    q = self.edges(key, out.embedding, slots, moves - 1)
    sign = mover_sign(jnp.where(identity < self.num_players, identity, 0), self.flip_opponents)
    return sign * jnp.max(jnp.where(keep, sign[:, None] * q, -jnp.inf), axis=-1)
