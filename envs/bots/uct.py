"""UCT on the true game, built on `mctx.search`: a generic bot for any
deterministic two-player zero-sum game (registered as `mcts[:S]`).

    policy = mcts_policy(env, num_simulations=64)
    actions = jax.jit(policy)(states, key)     # an `envs.Policy`

The real `Env` is the model: `recurrent_fn` steps it, and a leaf is valued by
one uniformly random rollout to the end of the game. Rewards are those of the
player who moved and values those of the player to move, so the discount is
-1 (0 once the game is over). Interior nodes choose by UCB1
`Q + uct_c * sqrt(log N / n)`, trying every unvisited legal child first
(random order); the root plays its most visited action, ties broken by Q, as
OpenSpiel's `MCTSBot` does. The policies only read `legal_action_mask` and
step the env (chance nodes are not modelled), so no game's encoding matters.
"""

from __future__ import annotations

from typing import Optional

import jax
import jax.numpy as jnp
import mctx

from envs.bots import Bot, register_bot
from envs.core import Env, State
from envs.policy import Policy, legal_slots, random_legal_action


def rollout_value(env: Env, state: State, key: jax.Array) -> jax.Array:
  """float32 `[B]`: the return of one uniformly random playout from each
  state of the batch `[B]`, for the player to move there (0 if done).

  Plays on the game core (no observations), until every game is over (at
  most `max_game_length` moves).
  """
  game = env.game
  mover = jnp.maximum(state.current_player, 0)
  batch = mover.shape[0]

  def cond(carry):
    g, _, _, n = carry
    live = jax.vmap(game.current_player)(g) >= 0
    return jnp.any(live) & (n < env.max_game_length)

  def body(carry):
    g, total, k, n = carry
    k, sub = jax.random.split(k)
    live = jax.vmap(game.current_player)(g) >= 0
    mask = jax.vmap(game.legal_action_mask)(g)
    a = random_legal_action(mask, sub)
    g2, r = jax.vmap(game.apply_action)(g, a)
    g = jax.tree.map(
      lambda new, old: jnp.where(live.reshape((-1,) + (1,) * (new.ndim - 1)), new, old), g2, g
    )
    return g, total + jnp.where(live[:, None], r, 0.0), k, n + 1

  zeros = jnp.zeros((batch, env.num_players), jnp.float32)
  _, total, _, _ = jax.lax.while_loop(cond, body, (state.game, zeros, key, jnp.int32(0)))
  value = jnp.take_along_axis(total, mover[:, None], -1)[:, 0]
  return jnp.where(state.done, 0.0, value)


def _legal_logits(valid: jax.Array) -> jax.Array:
  # Uniform prior over legal slots; the prior only marks legality for UCT.
  return jnp.where(valid, 0.0, -1e9)


def uct_action_selection(rng_key, tree: mctx.Tree, node_index, depth, *, uct_c: float) -> jax.Array:
  """mctx interior/root selection by UCB1 on one unbatched tree: unvisited
  legal children first (random order), else argmax of
  `Q + uct_c * sqrt(log N / n)` over legal children."""
  del depth
  visits = tree.children_visits[node_index]
  legal = tree.children_prior_logits[node_index] > -1e8
  q = tree.qvalues(node_index)
  parent = jnp.maximum(tree.node_visits[node_index], 1).astype(jnp.float32)
  ucb = q + uct_c * jnp.sqrt(jnp.log(parent) / jnp.maximum(visits, 1))
  noise = jax.random.uniform(rng_key, visits.shape)
  # |Q| <= 1 and N is small, so 1e6 ranks every unvisited child first.
  score = jnp.where(visits == 0, 1e6 + noise, ucb + 1e-6 * noise)
  return jnp.argmax(jnp.where(legal, score, -jnp.inf)).astype(jnp.int32)


def mcts_policy(
  env: Env, num_simulations: int = 64, uct_c: float = 2.0, max_legal_actions: Optional[int] = None
) -> Policy:
  """`policy(states [B], key) -> actions [B]`: UCT with random rollouts on the
  true game, `num_simulations` simulations per move, exploration `uct_c`.

  The tree's edges are slots: slot k of a node is the k-th legal action of
  its state (ascending), for `max_legal_actions` slots (default: the game's
  `max_legal_actions`). mctx keeps
  `[B, num_simulations + 1, slots]` arrays and rewrites them on every
  backward step, so 15 slots instead of Breakthrough 5x5's 75 actions make
  the search several times cheaper.
  """
  if num_simulations < 1:
    raise ValueError(f"mcts: num_simulations must be >= 1, got {num_simulations}")
  if env.num_players != 2 or env.payoff != "zero_sum":
    raise ValueError(
      f"mcts: needs a two-player zero-sum env, got {env.id} "
      f"({env.num_players} players, payoff {env.payoff})"
    )
  slots = max_legal_actions or env.max_legal_actions
  if not 1 <= slots <= env.num_actions:
    raise ValueError(f"mcts: max_legal_actions must be in 1..{env.num_actions}, got {slots}")

  def recurrent_fn(params, key, slot, state: State):
    del params
    actions, _ = legal_slots(state.legal_action_mask, slots)
    action = jnp.take_along_axis(actions, slot[:, None], -1)[:, 0]
    mover = state.current_player
    nxt = jax.vmap(env.step)(state, action)
    reward = jnp.take_along_axis(nxt.rewards, jnp.maximum(mover, 0)[:, None], -1)[:, 0]
    # A finished game (absorbing) gives nothing more.
    reward = jnp.where(state.done, 0.0, reward)
    value = rollout_value(env, nxt, key)
    discount = jnp.where(nxt.done, 0.0, -1.0)
    _, valid = legal_slots(nxt.legal_action_mask, slots)
    out = mctx.RecurrentFnOutput(
      reward=reward, discount=discount, prior_logits=_legal_logits(valid), value=value
    )
    return out, nxt

  def select(rng_key, tree, node_index, depth=0):
    return uct_action_selection(rng_key, tree, node_index, depth, uct_c=uct_c)

  def policy(state: State, key: jax.Array) -> jax.Array:
    k_root, k_search, k_tie = jax.random.split(key, 3)
    actions, valid = legal_slots(state.legal_action_mask, slots)
    root = mctx.RootFnOutput(
      prior_logits=_legal_logits(valid), value=rollout_value(env, state, k_root), embedding=state
    )
    tree = mctx.search(
      params=None,
      rng_key=k_search,
      root=root,
      recurrent_fn=recurrent_fn,
      root_action_selection_fn=select,
      interior_action_selection_fn=select,
      num_simulations=num_simulations,
      invalid_actions=~valid,
    )
    # Most visited; ties (common with few simulations) go to the higher Q,
    # then at random: the lowest index would favour one side's back pieces.
    root = jnp.zeros(state.current_player.shape, jnp.int32)
    q = tree.qvalues(root)  # in [-1, 1], the root mover's view
    noise = jax.random.uniform(k_tie, q.shape)
    score = 4.0 * tree.children_visits[:, 0] + (q + 1.0) + 1e-3 * noise
    best = jnp.argmax(jnp.where(valid, score, -jnp.inf), -1)
    return jnp.take_along_axis(actions, best[:, None], -1)[:, 0]

  return policy


def deterministic_two_player_zero_sum(env: Env) -> bool:
  return env.num_players == 2 and env.payoff == "zero_sum" and env.num_chance_outcomes == 1


register_bot(
  Bot(
    "mcts",
    lambda env, sims: mcts_policy(env, num_simulations=sims),
    needs="a deterministic two-player zero-sum game (e.g. breakthrough)",
    applies=deterministic_two_player_zero_sum,
    arg="simulations",
    default=64,
  )
)
