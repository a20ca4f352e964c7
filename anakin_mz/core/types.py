"""Data types shared by the network, the search, self-play and the learner.

Point of view: every value and reward inside the agent is from the point of
view of the *root mover*, the player to move at the observed decision node the
search (or a training unroll) starts from. The identity head predicts the
*relative* player of a latent state: `(player - root_player) mod num_players`,
so relative player 0 is the root mover. Index `num_players` means chance and
`num_players + 1` terminal. With these conventions the tree needs no discount
of -1: a choice node of relative player r reads Q with sign +1 if r == 0 or
the payoff is single/collaborative, and -1 otherwise (two-player zero-sum).

Unified actions (the paper's A = A_pi U A_psi): player action `a` is `a`,
chance outcome `c` is `num_actions + c`, for `num_actions + num_chance_outcomes`
actions in all.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import chex
import jax
import jax.numpy as jnp

Params = chex.ArrayTree
Embedding = chex.ArrayTree
# An agent's model: its network and, for the agents that plan with the real
# game, the game (`networks.Network`, `agents.alphazero.TrueModel`, ...). Only
# the agent's own callables look inside it (`core.registry`).
Model = Any


@chex.dataclass(frozen=True)
class ModelOutput:
  """One evaluation of the learned model (g then f, or h then f at the root)
  for a batch of latent states.

  Attributes:
    reward: `[B]` reward of the transition into the state, root mover's POV
      (zeros at the root).
    value: `[B]` value of the state, root mover's POV.
    policy_logits: `[B, num_actions]` choice-policy logits.
    chance_logits: `[B, num_chance_outcomes]` chance-policy logits.
    identity_logits: `[B, num_players + 2]` who acts in the state: relative
      player, chance (`num_players`), terminal (`num_players + 1`).
    embedding: the latent state, `[B, ...]`.
  """

  reward: chex.Array
  value: chex.Array
  policy_logits: chex.Array
  chance_logits: chex.Array
  identity_logits: chex.Array
  embedding: Embedding


@chex.dataclass(frozen=True)
class UnrollOutput:
  """`Network.unroll` along K unified actions (h, then K steps of g and f):
  what the loss reads. V is 1 for scalar heads, else the support size.

  Attributes:
    value_logits: `[B, K+1, V]` value at depths 0..K.
    reward_logits: `[B, K, V]` reward of the transition into depths 1..K.
    policy_logits: `[B, K+1, A]` choice-policy logits at depths 0..K.
    chance_logits: `[B, K+1, C]` chance-policy logits at depths 0..K.
    identity_logits: `[B, K, P+2]` who acts at depths 1..K.
    policy_noop_logits, chance_noop_logits: `[B, K+1]` the no-op logit of
      each policy head (its logits are then `[..., A]` and this, or
      `[..., C]` and this), or None for a network without the no-op action
      (`NetworkConfig.noop_action`).
    latents: `[B, K, *latent]` the hidden states g reached at depths 1..K
      (the consistency term reads them), or None where an unroll has none.
    root_latent: `[B, *latent]` h's latent at depth 0 (the reconstruction
      term reads it), or None where an unroll has none.
  """

  value_logits: chex.Array
  reward_logits: chex.Array
  policy_logits: chex.Array
  chance_logits: chex.Array
  identity_logits: chex.Array
  policy_noop_logits: Optional[chex.Array] = None
  chance_noop_logits: Optional[chex.Array] = None
  latents: Optional[chex.Array] = None
  root_latent: Optional[chex.Array] = None


# recurrent_fn(params, rng_key, unified_action [B] int32, embedding) -> ModelOutput
RecurrentFn = Callable[[Params, chex.PRNGKey, chex.Array, Embedding], ModelOutput]


def terminal_identity(num_players: int) -> int:
  """Identity-head index of a terminal node."""
  return num_players + 1


def relative_identity(player: jax.Array, root_player: jax.Array, num_players: int) -> jax.Array:
  """int32: identity-head class of absolute `player` (`envs.CHANCE` and
  `envs.TERMINAL` included) seen from `root_player`. Shapes broadcast."""
  from envs.core import CHANCE

  rel = jnp.mod(player - root_player, num_players)
  return jnp.where(
    player >= 0, rel, jnp.where(player == CHANCE, num_players, num_players + 1)
  ).astype(jnp.int32)


def certain_identity_logits(identity: jax.Array, num_classes: int) -> jax.Array:
  """float32 `[..., num_classes]`: identity-head logits naming class
  `identity` (int `[...]`) for certain, 0 there and -inf elsewhere: the
  identity of a node whose kind is known (the real game's, or one fixed by
  a model's structure)."""
  return jnp.where(jax.nn.one_hot(identity, num_classes, dtype=jnp.bool_), 0.0, -jnp.inf)


def where_lanes(mask: chex.Array, x: chex.ArrayTree, y: chex.ArrayTree) -> chex.ArrayTree:
  """Per-lane select between two batched pytrees: lane `i` of `x` where
  `mask[i]`, else of `y` (`mask` `[B]`, every leaf `[B, ...]`)."""
  return jax.tree.map(lambda a, b: jnp.where(mask.reshape((-1,) + (1,) * (a.ndim - 1)), a, b), x, y)
