"""Values of true game states, with the chance that follows averaged exactly.

The agents that plan with the real game (`alphazero`, `tdlambda`) share one
rule for the value of a state reached in their lookahead, from the point of
view of a fixed `root_player` and with the config's per-transition discount:

* a decision node: the network's value of its observation (the mover's view),
  with the sign of the mover seen from `root_player` (-1 for an opponent in a
  two-player zero-sum game, as `search.mover_sign`);
* a terminal node: 0 (its reward is on the edge into it);
* a chance node: `sum_c p_c (r_c + discount * V(child_c))` over the outcomes
  of the game's `chance_probs` (one level, exact). A child that is itself a
  chance node (a forfeited turn in Nannon, rare) counts with the network's
  value of its own observation (the `Game.perspective` player's view): the
  lookahead stops there rather than branching C^2 ways.

The caller evaluates the network once on the observations of the states and
of their chance children (`observations`) and hands the values back
(`state_values`), so all network calls of one lookahead are one batch.

A chance node keeps `env.max_chance_outcomes` slots, its outcomes of positive
probability in ascending order, not the whole outcome space (Nannon 6-3-6: 6
of 16, so a two-move lookahead values 147 positions per move, not 867). The
bound holds after a game's first decision, so the states handed in are ones
reached by a move (and their chance descendants), as every caller's are. Inside
jit a chance node with more outcomes of positive probability than the slots
(a game's opening, or a game that breaks its bound) is valued NaN, never by a
part of its outcomes.
"""

from __future__ import annotations

from typing import Callable, Tuple

import chex
import jax
import jax.numpy as jnp

import envs


def view_player(env: envs.Env, state: envs.State) -> chex.Array:
  """int32 `[...]`: whose view `state.observation` takes (the mover at a
  decision node, `Game.perspective` elsewhere)."""
  view = _batched(env.game.perspective, state.current_player.ndim)(state.game)
  return jnp.where(state.current_player >= 0, state.current_player, view).astype(jnp.int32)


def _batched(fn, ndim):
  for _ in range(ndim):
    fn = jax.vmap(fn)
  return fn


def sign(player: chex.Array, root_player: chex.Array, flip_opponents: bool) -> chex.Array:
  """+1 or -1: turns a value from `player`'s view into `root_player`'s."""
  return jnp.where(flip_opponents & (player != root_player), -1.0, 1.0)


@chex.dataclass(frozen=True)
class ChanceChildren:
  """The chance outcomes of `[N]` states, in `C = env.max_chance_outcomes`
  slots.

  Attributes:
    states: `[N, C]` the states each slot's outcome leads to (`env.step`
      explicit; meaningless but defined in a slot of probability 0).
    probs: float32 `[N, C]` the slot's probability: 0 in an unused slot and
      at a state that is not a chance node.
    complete: bool `[N]`: the slots hold all of the state's outcomes of
      positive probability (True at a state that is not a chance node).
  """

  states: envs.State
  probs: chex.Array
  complete: chex.Array


def chance_children(env: envs.Env, state: envs.State) -> ChanceChildren:
  """The outcomes of positive probability of each of the `[N]` states
  (ascending, `env.max_chance_outcomes` slots) and the states they lead to."""
  chance = state.current_player == envs.CHANCE
  possible = (state.chance_probs > 0) & chance[:, None]
  outcomes, valid = envs.legal_slots(possible, env.max_chance_outcomes)
  probs = jnp.where(valid, jnp.take_along_axis(state.chance_probs, outcomes, axis=-1), 0.0)
  states = jax.vmap(lambda s, o: jax.vmap(lambda c: env.step(s, c))(o))(state, outcomes)
  complete = jnp.sum(possible, axis=-1) <= env.max_chance_outcomes
  return ChanceChildren(states=states, probs=probs, complete=complete)


def observations(state: envs.State, children: ChanceChildren) -> chex.Array:
  """`[N + N * C, *obs]`: the states' observations, then their children's."""
  n, c = children.probs.shape
  obs = children.states.observation.reshape((n * c,) + children.states.observation.shape[2:])
  return jnp.concatenate([state.observation, obs])


def state_values(
  env: envs.Env,
  state: envs.State,
  children: ChanceChildren,
  values: chex.Array,
  root_player: chex.Array,
  *,
  discount: float,
) -> chex.Array:
  """`[N]` values of `state` `[N]` from `root_player` `[N]`'s view (the
  module's rule).

  Args:
    env: the game.
    state: `[N]` states.
    children: `chance_children(env, state)`, `C` slots.
    values: `[N + N * C]` network values of `observations(state, children)`,
      each from its observation's view (`view_player`).
    root_player: int32 `[N]`.
    discount: per-transition discount.
  """
  n = children.probs.shape[0]
  flip = env.payoff == "zero_sum"
  own = sign(view_player(env, state), root_player, flip) * values[:n]
  kid_view = view_player(env, children.states)
  kids = sign(kid_view, root_player[:, None], flip) * values[n:].reshape(n, -1)
  return _combine(state, children, own, kids, root_player, discount)


def _combine(state, children, own, kids, root_player, discount):
  """`[N]`: the module's rule, given `own` `[N]` (the value of each state as a
  decision node) and `kids` `[N, C]` (of each chance child), both already
  from `root_player`'s view."""
  n, c = children.probs.shape
  kid_value = jnp.where(children.states.current_player == envs.TERMINAL, 0.0, kids)
  kid_reward = jnp.take_along_axis(
    children.states.rewards, jnp.broadcast_to(root_player[:, None, None], (n, c, 1)), axis=-1
  )[..., 0]
  # An unused slot adds 0 even where its meaningless child's value is not finite.
  weighted = children.probs * (kid_reward + discount * kid_value)
  expected = jnp.sum(jnp.where(children.probs > 0, weighted, 0.0), axis=-1)
  # NaN rather than the average of a part of the outcomes (module docstring).
  expected = jnp.where(children.complete, expected, jnp.nan)
  return jnp.where(
    state.current_player == envs.CHANCE,
    expected,
    jnp.where(state.current_player == envs.TERMINAL, 0.0, own),
  )


def node_values(
  env: envs.Env,
  value_fn: Callable[[chex.Array], chex.Array],
  state: envs.State,
  root_player: chex.Array,
  *,
  moves: int,
  discount: float,
) -> chex.Array:
  """`[N]` values of `state` `[N]` (any kind of node) from `root_player`
  `[N]`'s view, looking `moves` more moves ahead before the network values.

  `moves=0` is the module's rule (`state_values`). With `moves > 0` a
  decision node, and a decision node reached by the chance that follows a
  state, is valued by its mover's best legal move (`expectimax_policy` of
  `moves` moves, `OnePlyPolicy.choose`) instead of by the network: the
  mover maximises its own view (in a zero-sum game it minimises
  `root_player`'s; a collaborative game's movers share one view), chance
  is averaged exactly, and a chance child that is itself a chance node
  still stops at the network. The tree has fixed
  shapes: every node is expanded both as a decision node
  (`env.max_legal_actions` slots) and as a chance node (`C =
  env.max_chance_outcomes` slots), and its kind picks the result, so the
  network sees about `N * ((1 + C) * max_legal_actions) ** moves * (1 + C)`
  observations, in one batch per level.
  """
  children = chance_children(env, state)
  values = value_fn(observations(state, children))
  if moves == 0:
    return state_values(env, state, children, values, root_player, discount=discount)
  n, c = children.probs.shape
  flip = env.payoff == "zero_sum"
  kids = jax.tree.map(lambda x: x.reshape((n * c,) + x.shape[2:]), children.states)
  nodes = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), state, kids)
  roots = jnp.concatenate([root_player, jnp.repeat(root_player, c)])
  # A decision node's mover plays its best move of the `moves`-deep
  # expectimax, valued from its own view; the sign turns that value to
  # `root_player`'s (exactly: a zero-sum value and reward only flip sign).
  policy = expectimax_policy(env, value_fn, discount=discount, depth=moves)
  mover = jnp.maximum(nodes.current_player, 0)
  best = sign(mover, roots, flip) * policy.choose(nodes)[1]
  net = sign(view_player(env, nodes), roots, flip) * values
  value = jnp.where(nodes.current_player >= 0, best, net)
  return _combine(state, children, value[:n], value[n:].reshape(n, c), root_player, discount)


def expectimax_policy(
  env: envs.Env,
  value_fn: Callable[[chex.Array], chex.Array],
  *,
  discount: float,
  depth: int = 1,
) -> envs.OnePlyPolicy:
  """An expectimax player on `env` searching `depth` moves, with the value
  function `value_fn` (`[M, *obs]` observations -> `[M]` values, each from
  its observation's view) at the leaves: every legal move is tried on the
  real game and its successor valued by `node_values` with `depth - 1` more
  moves. `depth=1` is TD-Gammon's 1-ply player (one `value_fn` call for all
  successors and their chance children); `depth=2` also tries every reply
  to every chance outcome. TD(lambda) plays it with its value network
  (`tdlambda.expectimax`), `evaluate.py --player value` with a checkpoint's
  value head (`AgentSpec.value_policy`), both at `search.expectimax_depth`.

  Raises:
    ValueError: `depth` is not an int >= 1.
  """
  if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
    raise ValueError(f"expectimax depth must be an int >= 1, got {depth!r}")

  def successor_value(state: envs.State, root_player: chex.Array) -> chex.Array:
    return node_values(env, value_fn, state, root_player, moves=depth - 1, discount=discount)

  return envs.OnePlyPolicy(env=env, successor_value=successor_value, discount=discount)


def siblings(
  policy: envs.OnePlyPolicy, state: envs.State, *, lane_stride: int = 1
) -> Tuple[chex.Array, chex.Array]:
  """Every legal move of `state` `[B]` and its value one ply deep on the
  real game, what the sibling-value term trains the learned model's
  one-step values on (`loss.sibling_value_loss`).

  `lane_stride` s > 1 (`LossConfig.sibling_lane_stride`) values lanes 0, s,
  2s, ... alone (the policy runs on those lanes only: its cost divided by
  s); the other lanes get the rows of a lane at no decision node.

  Returns:
    (action int32 `[B, S]`, q float32 `[B, S]`) in `S =
    env.max_legal_actions` slots: the legal moves ascending, -1 in an unused
    slot (and in every slot of a lane not at a decision node, or not
    valued); q is `policy.action_values` at the move (the mover's view, 0
    where -1).
  """
  if lane_stride != 1:
    batch = state.current_player.shape[0]
    sub_action, sub_q = siblings(policy, jax.tree.map(lambda x: x[::lane_stride], state))
    action = jnp.full((batch,) + sub_action.shape[1:], -1, sub_action.dtype)
    q = jnp.zeros((batch,) + sub_q.shape[1:], sub_q.dtype)
    return action.at[::lane_stride].set(sub_action), q.at[::lane_stride].set(sub_q)
  env = policy.env
  values = policy.action_values(state)  # [B, A]
  mask = state.legal_action_mask & (state.current_player >= 0)[:, None]
  actions, valid = envs.legal_slots(mask, env.max_legal_actions)
  q = jnp.take_along_axis(values, actions, axis=-1)
  return jnp.where(valid, actions, -1), jnp.where(valid, q, 0.0)
