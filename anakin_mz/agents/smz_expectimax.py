"""Stochastic MuZero's model in the expectimax play search
(`play_search.root: expectimax`, `core.search.expectimax`).

The expectimax search reads NDMZ's node form: one `recurrent_fn` over
unified actions (moves `[0, A)`, chance outcomes `A + o`) whose outputs
(`types.ModelOutput`) carry root-mover values and an identity head that
names each node's kind. Stochastic MuZero's model has two steps instead,
phi then psi from a state (an afterstate, its value Q and code prior sigma)
and g then f from an afterstate (the next state, its reward, turn, policy
and value), and values from the view of the player who chooses (a state) or
who just moved (an afterstate). `recurrent_fn` below makes the one from the
other, so the same search (and the same tests of it) plays both agents:

* the embedding carries the latent, whether it is an afterstate, and the
  relative mover (0 the root mover): the player who chooses at a state,
  who just moved at an afterstate;
* a move from a state gives its afterstate: reward 0, value Q, identity
  chance, chance logits sigma (a code per outcome slot);
* an outcome (a code) from an afterstate gives the next state: its reward
  (the mover's), value and policy; its mover flips where the turn head's
  argmax says the mover changes (two-player zero-sum games);
* values and rewards are turned to the root mover's view by the mover's
  sign (`tree.mover_sign`), as NDMZ's heads give them.

Every node computes both steps and keeps the one its kind takes (the
search asks every node for moves and outcomes alike and keeps what the
identity says), so a move asked of an afterstate, or a code of a state, is
defined (its index clipped) and then discarded. The model has no terminal
head: no node is terminal. The discount applies on every edge, the move's
edge included (mctx's tree applies it on the chance edge alone): the same
for the default `discount: 1` of every board game here.

With `expectimax_afterstate` one move deep the search ranks the root's
legal moves by Q of phi(h(o), a), Stochastic MuZero's afterstate value
(tested equal).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from anakin_mz.core.search import SearchConfig, SearchOutput
from anakin_mz.core.search.expectimax import expectimax_search
from anakin_mz.core.search.tree import mover_sign
from anakin_mz.core.types import ModelOutput, Params, certain_identity_logits, where_lanes


@chex.dataclass(frozen=True)
class SMZNode:
  """A node of Stochastic MuZero's model in the expectimax search.

  Attributes:
    latent: `[B, D]` the state or afterstate.
    afterstate: `[B]` bool, whether `latent` is an afterstate.
    mover: `[B]` int32 relative player: who chooses at a state, who just
      moved at an afterstate (0 the root mover).
  """

  latent: chex.Array
  afterstate: chex.Array
  mover: chex.Array


def recurrent_fn(network, params: Params, rng_key, action: chex.Array, node: SMZNode):
  """NDMZ's `recurrent_fn` on Stochastic MuZero's model `network` (a
  `stochastic_muzero.StochasticNetwork`, which imports this module; module docstring):
  unified actions `action` `[B]` from `node` `[B]` -> `ModelOutput` `[B]`
  whose embedding is the children's `SMZNode`."""
  del rng_key
  net = network
  batch = action.shape[0]
  move = jnp.clip(action, 0, net.num_actions - 1)
  code = jnp.clip(action - net.num_actions, 0, net.num_codes - 1)
  sign = mover_sign(node.mover, net.flip)
  # A state's move: phi, then psi.
  after = net.afterstate(params, node.latent, move)
  q, sigma = net.afterstate_predict(params, after)
  # An afterstate's code: g, then f.
  one_hot = jax.nn.one_hot(code, net.num_codes, dtype=node.latent.dtype)
  state, reward, turn = net.dynamics(params, node.latent, one_hot)
  policy, value = net.predict(params, state)
  changes = net.flip & (jnp.argmax(turn, axis=-1) == 1)
  mover = jnp.where(changes, 1 - node.mover, node.mover).astype(jnp.int32)
  from_state = jnp.logical_not(node.afterstate)
  pick = lambda a, b: where_lanes(from_state, a, b)
  child = SMZNode(
    latent=pick(after, state),
    afterstate=from_state,
    mover=jnp.where(from_state, node.mover, mover).astype(jnp.int32),
  )
  out = ModelOutput(
    reward=jnp.where(from_state, 0.0, sign * net.to_scalar(reward)),
    value=jnp.where(
      from_state, sign * net.to_scalar(q), mover_sign(mover, net.flip) * net.to_scalar(value)
    ),
    policy_logits=pick(jnp.zeros_like(policy), policy),
    chance_logits=pick(sigma, jnp.zeros_like(sigma)),
    identity_logits=pick(
      certain_identity_logits(jnp.full((batch,), net.num_players), net.num_players + 2),
      certain_identity_logits(mover, net.num_players + 2),
    ),
    embedding=child,
  )
  return out


def root_output(network, params: Params, observation: chex.Array) -> ModelOutput:
  """h then f on `[B, *obs]` (`network.root`) with the roots as `SMZNode`s:
  states, the root mover's (0) to choose."""
  root = network.root(params, observation)
  batch = root.value.shape[0]
  node = SMZNode(
    latent=root.embedding,
    afterstate=jnp.zeros((batch,), bool),
    mover=jnp.zeros((batch,), jnp.int32),
  )
  return root.replace(embedding=node)


def smz_expectimax(
  params: Params,
  rng_key: chex.PRNGKey,
  network,
  observation: chex.Array,
  legal_action_mask: chex.Array,
  *,
  config: SearchConfig,
) -> SearchOutput:
  """`core.search.expectimax`'s search on Stochastic MuZero's model from the
  decision states observed as `observation` `[B, *obs]` with legal moves
  `legal_action_mask` `[B, A]`. Reads `config`'s expectimax keys and
  discount; `search_tree` is None."""
  return expectimax_search(
    params,
    rng_key,
    root_output(network, params, observation),
    lambda p, k, a, n: recurrent_fn(network, p, k, a, n),
    legal_action_mask.astype(bool),
    num_players=network.num_players,
    flip_opponents=network.flip,
    config=config,
  )
