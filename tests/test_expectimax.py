"""The expectimax of `lookahead.expectimax_policy` beyond one ply
(`search.expectimax_depth`): on EinStein against the game's own
expectiminimax bot (`envs.bots.einstein`, written apart from it) with the
same leaf values, on Nannon against a plain Python recursion over the real
game, and the setting's validation. The 1-ply player's exact numbers are in
`test_tdlambda.py` and `test_nannon_solver.py`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from anakin_mz.core import lookahead
from anakin_mz.core.search import SearchConfig
from envs.bots.einstein import expectiminimax_values
from envs.core import CHANCE, TERMINAL


def _linear_value(env, seed):
  """A fixed value function `[M, *obs] -> [M]` in (-1, 1), not symmetric in
  anything the games know about."""
  size = int(np.prod(env.observation_shape))
  w = jax.random.normal(jax.random.PRNGKey(seed), (size,)) / np.sqrt(size)
  return lambda obs: jnp.tanh(obs.reshape((obs.shape[0], -1)) @ w + 0.1)


def _decision_states(env, key, count, max_moves):
  """`count` decision states of random play, each after a random number of
  transitions below `max_moves` (games that ended are restarted)."""

  def one(key):
    k0, k1, k2 = jax.random.split(key, 3)
    stop = jax.random.randint(k1, (), 0, max_moves)

    def body(i, carry):
      s, k = carry
      k, ka, kc, kr = jax.random.split(k, 4)
      b = jax.tree.map(lambda x: x[None], s)
      action = jnp.where(
        s.current_player == CHANCE, envs.chance_outcome(s, kc), envs.random_policy(b, ka)[0]
      )
      nxt = env.step(s, action)
      nxt = jax.tree.map(lambda a, r: jnp.where(nxt.done, r, a), nxt, env.reset(kr))
      keep = i < stop
      return jax.tree.map(lambda a, b: jnp.where(keep, a, b), nxt, s), k

    s, k = jax.lax.fori_loop(0, max_moves, body, (env.reset(k0), k2))

    # Then on to the next decision node.
    def to_decision(carry):
      s, k = carry
      k, kc = jax.random.split(k)
      return env.step(s, envs.chance_outcome(s, kc)), k

    s, _ = jax.lax.while_loop(lambda c: c[0].current_player < 0, to_decision, (s, k))
    return s

  states = jax.jit(jax.vmap(one))(jax.random.split(key, count))
  assert bool(jnp.all(states.current_player >= 0))
  return states


_N = 16


def test_depth_two_is_the_einstein_bots_expectiminimax_with_the_same_leaves():
  """With the network's value averaged over the die as the bot's leaf score,
  the 2-ply expectimax values every legal move as the bot's depth-2
  expectiminimax does: the same reply tree, the same averages."""
  env = envs.make("einstein")
  game = env.game
  value_fn = _linear_value(env, 0)

  def leaf(h, root):
    # The bot scores the state after a move, before the roll; expectimax
    # averages the network over the roll, each roll a decision node of
    # `root` here (the bot asks at depth 2 only after the opponent's reply).
    rolls = jax.vmap(lambda face: game.apply_chance(h, face)[0])(jnp.arange(6))
    obs = jax.vmap(lambda r: game.observe(r, root))(rolls)
    return jnp.mean(value_fn(obs))

  states = _decision_states(env, jax.random.PRNGKey(1), _N, 30)
  policy = lookahead.expectimax_policy(env, value_fn, discount=1.0, depth=2)
  ours = np.asarray(jax.jit(policy.action_values)(states))
  actions, valid, values = jax.jit(jax.vmap(lambda g: expectiminimax_values(game, g, 2, leaf)))(
    states.game
  )
  actions, valid, values = map(np.asarray, (actions, valid, values))
  assert valid.sum() > _N * 2  # most positions have a real choice
  for b in range(_N):
    np.testing.assert_allclose(ours[b, actions[b][valid[b]]], values[b][valid[b]], atol=2e-5)
    # Illegal actions read 0 (defined, never played).
    legal = np.asarray(states.legal_action_mask[b])
    assert np.all(ours[b][~legal] == 0.0)
  # The second ply matters: on these random positions it changes the move
  # the 1-ply player would make somewhere (a depth setting that were ignored
  # would not).
  one_ply = lookahead.expectimax_policy(env, value_fn, discount=1.0, depth=1)
  shallow = np.asarray(jax.jit(one_ply.action_values)(states))
  legal = np.asarray(states.legal_action_mask)
  best, best_shallow = (np.where(legal, q, -np.inf).argmax(-1) for q in (ours, shallow))
  assert 0 < np.sum(best != best_shallow) < _N


def _reference(env, value_fn, state, root, moves, discount, step):
  """The module rule of `lookahead.node_values`, one state at a time."""
  flip = env.payoff == "zero_sum"

  def net(s, player):
    v = float(value_fn(s.observation[None])[0])
    return -v if flip and player != root else v

  def decision(s):
    mover = int(s.current_player)
    best, best_key = 0.0, -np.inf
    for a in np.flatnonzero(np.asarray(s.legal_action_mask)):
      nxt = step(s, a)
      q = float(nxt.rewards[root]) + discount * _reference(
        env, value_fn, nxt, root, moves - 1, discount, step
      )
      key = -q if flip and mover != root else q
      if key > best_key:
        best, best_key = q, key
    return best

  player = int(state.current_player)
  if player == TERMINAL:
    return 0.0
  if player >= 0:
    return net(state, player) if moves == 0 else decision(state)
  total = 0.0
  for c, p in enumerate(np.asarray(state.chance_probs)):
    if p == 0:
      continue
    child = step(state, c)
    kind = int(child.current_player)
    if kind == TERMINAL:
      v = 0.0
    elif kind == CHANCE:  # the lookahead stops at a chance node after chance
      v = net(child, int(env.game.perspective(child.game)))
    else:
      v = net(child, kind) if moves == 0 else decision(child)
    total += float(p) * (float(child.rewards[root]) + discount * v)
  return total


def test_depth_two_matches_a_python_recursion_on_nannon():
  depth = 2  # depth 1: test_nannon_solver tabulates it bit for bit
  env = envs.make("nannon")
  value_fn = _linear_value(env, 3)
  discount = 0.9  # a discount below 1 counts on every edge
  states = _decision_states(env, jax.random.PRNGKey(4), 2, 20)
  policy = lookahead.expectimax_policy(env, value_fn, discount=discount, depth=depth)
  ours = np.asarray(jax.jit(policy.action_values)(states))
  step = jax.jit(env.step)
  for b in range(2):
    s = jax.tree.map(lambda x: x[b], states)
    mover = int(s.current_player)
    for a in np.flatnonzero(np.asarray(s.legal_action_mask)):
      nxt = step(s, a)
      want = float(nxt.rewards[mover]) + discount * _reference(
        env, value_fn, nxt, mover, depth - 1, discount, step
      )
      np.testing.assert_allclose(ours[b, a], want, atol=2e-5)


@pytest.mark.parametrize("depth", [0, 4, True, 1.5, "2"])
def test_expectimax_depth_is_validated(depth):
  with pytest.raises(ValueError, match="expectimax_depth must be an int in 1..3"):
    SearchConfig(expectimax_depth=depth)
  env = envs.make("nannon")
  if depth != 4:
    with pytest.raises(ValueError, match="expectimax depth must be an int >= 1"):
      lookahead.expectimax_policy(env, _linear_value(env, 0), discount=1.0, depth=depth)


def test_chance_slots_hold_the_outcomes_of_positive_probability_only():
  """A chance node keeps `max_chance_outcomes` slots (Nannon 12-5-6: 6 of its
  16 outcomes), its possible outcomes ascending with their probabilities;
  a decision node none; and the value is the average over all outcomes (the
  Python recursion above, which walks the whole outcome space)."""
  env = envs.make("nannon", points=12, checkers=5, die_sides=6)
  value_fn = _linear_value(env, 5)
  decisions = _decision_states(env, jax.random.PRNGKey(6), 3, 30)
  moved = jax.vmap(env.step)(decisions, jnp.argmax(decisions.legal_action_mask, -1))
  states = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), moved, decisions)
  root = jnp.concatenate([decisions.current_player] * 2).astype(jnp.int32)
  kids = jax.jit(lookahead.chance_children, static_argnums=0)(env, states)
  assert kids.probs.shape == (6, env.max_chance_outcomes) and env.num_chance_outcomes == 16
  step = jax.jit(env.step)
  values = np.asarray(
    jax.jit(lambda s, r: lookahead.node_values(env, value_fn, s, r, moves=0, discount=0.9))(
      states, root
    )
  )
  for b in range(6):
    s = jax.tree.map(lambda x: x[b], states)
    want = _reference(env, value_fn, s, int(root[b]), 0, 0.9, step)
    np.testing.assert_allclose(values[b], want, atol=2e-6)
    if b < 3:  # a die roll (no move ends a 12-5-6 game from these)
      assert int(s.current_player) == CHANCE
      np.testing.assert_allclose(np.asarray(kids.probs[b]), np.full(6, 1 / 6), rtol=1e-6)
      # Slot k rolled k + 1 (a child where no move is legal forfeits: die 0).
      rolled = np.asarray(kids.states.current_player[b]) >= 0
      die = np.asarray(kids.states.game.die[b])
      np.testing.assert_array_equal(die[rolled], (np.arange(6) + 1)[rolled])
      assert rolled.sum() >= 4
    else:
      assert not np.any(np.asarray(kids.probs[b]))
    assert bool(kids.complete[b])


def test_a_chance_node_beyond_its_slots_is_valued_nan_not_in_part():
  """Inside jit a chance node with more possible outcomes than
  `max_chance_outcomes` (Nannon's opening: 10 for 6 slots; the bound holds
  after the first decision) is NaN at every depth, never the average of the
  outcomes that fit."""
  env = envs.make("nannon")
  value_fn = _linear_value(env, 7)
  opening = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
  root = jnp.zeros((2,), jnp.int32)
  for moves in (0, 1):
    v = lookahead.node_values(env, value_fn, opening, root, moves=moves, discount=1.0)
    assert np.all(np.isnan(np.asarray(v))), moves
  assert not np.any(np.asarray(lookahead.chance_children(env, opening).complete))
