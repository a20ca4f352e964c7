"""Stochastic MuZero's model in the expectimax play search
(anakin_mz/agents/smz_expectimax.py): exact numbers on the hand-set model of
test_stochastic_muzero (the turn head's sign on every edge), a plain
recursion over Stochastic MuZero's own functions on a random network, and the
config: the expectimax plays, self-play keeps PUCT."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_stochastic_muzero import CHANGES, SAME, Q, R, V, _hand_set

import envs
import tiny
from anakin_mz import config as config_lib
from anakin_mz.agents import stochastic_muzero
from anakin_mz.agents.smz_expectimax import recurrent_fn, root_output, smz_expectimax
from anakin_mz.core.networks import NetworkConfig
from anakin_mz.core.search import SearchConfig
from anakin_mz.core.search.expectimax import action_values


def _search(net, params, obs, legal, **kw):
  config = SearchConfig(root="expectimax", **kw)
  run = jax.jit(lambda p, k: smz_expectimax(p, k, net, obs, legal, config=config))
  return run(params, jax.random.PRNGKey(0))


@pytest.mark.parametrize(
  "game, turn, depth, afterstate, want",
  [
    # One move: the afterstate's own value Q, or the code averaged: the
    # chance edge's reward R plus the next state's V, negated where the
    # mover changes in a zero-sum game.
    ("nannon", SAME, 1, True, Q),
    ("nannon", SAME, 1, False, R + V),
    ("nannon", CHANGES, 1, False, R - V),
    ("catch", CHANGES, 1, False, R + V),  # one player: the head is not read
    # Two moves, the reply's afterstate last: R, then the replier's Q (its
    # own view, so -Q for the root mover when the mover changed).
    ("nannon", SAME, 2, True, R + Q),
    ("nannon", CHANGES, 2, True, R - Q),
    # Two moves and a code: R + sign * (R + sign * V) with the sign of the
    # turn; where it changes twice the last state is the root mover's again.
    ("nannon", CHANGES, 2, False, R - (R - V)),
    ("nannon", SAME, 2, False, R + R + V),
  ],
)
def test_hand_set_model_gives_exact_values(game, turn, depth, afterstate, want):
  env = envs.make(game)
  net, params = _hand_set(env, turn=turn)
  obs = jnp.zeros((2,) + tuple(env.observation_shape), jnp.float32)
  legal = jnp.zeros((2, env.num_actions), bool).at[0, 1].set(True).at[1, :].set(True)
  out = _search(net, params, obs, legal, expectimax_depth=depth, expectimax_afterstate=afterstate)
  np.testing.assert_allclose(out.root_value, [want, want], rtol=1e-5)
  assert int(out.action[0]) == 1  # the one legal move
  assert out.search_tree is None


def _reference(net, params, obs, legal, config):
  """A plain recursion over Stochastic MuZero's own functions (phi, psi, g,
  f; values in the chooser's or the mover's view), one node at a time."""
  sign = lambda m: -1.0 if net.flip and m else 1.0
  scalar = lambda logits: float(net.to_scalar(logits)[0])
  width = config.expectimax_width or net.num_actions

  def after(state, action, mover, moves):
    a = net.afterstate(params, state, jnp.asarray([action]))
    q, sigma = net.afterstate_predict(params, a)
    if moves == 0 and config.expectimax_afterstate:
      return sign(mover) * scalar(q)
    p = np.asarray(jax.nn.softmax(sigma[0]), np.float64)
    top = np.argsort(-p, kind="stable")[: config.expectimax_chance_width or len(p)]
    total = 0.0
    for c in top:
      code = jax.nn.one_hot(jnp.asarray([c]), net.num_codes)
      s, r, turn = net.dynamics(params, a, code)
      nxt = 1 - mover if net.flip and int(jnp.argmax(turn[0])) == 1 else mover
      total += p[c] * (sign(mover) * scalar(r) + choose(s, nxt, moves))
    return total / p[top].sum()

  def choose(state, mover, moves):
    policy, value = net.predict(params, state)
    if moves == 0:
      return sign(mover) * scalar(value)
    p = np.asarray(jax.nn.softmax(policy[0]), np.float64)
    order = np.argsort(-p, kind="stable")[:width]
    kept = [a for i, a in enumerate(order) if i == 0 or p[a] >= config.expectimax_min_prior]
    s = sign(mover)
    return s * max(s * after(state, int(a), mover, moves - 1) for a in kept)

  root = net.represent(params, obs[None])
  policy, _ = net.predict(params, root)
  logits = np.where(legal, np.asarray(policy[0]), -np.inf)
  out = np.full(net.num_actions, -np.inf)
  for a in np.argsort(-logits, kind="stable")[:width]:
    if legal[a]:
      out[a] = after(root, int(a), 0, config.expectimax_depth - 1)
  return out


@pytest.mark.parametrize(
  "depth, width, chance_width, afterstate",
  [(1, None, None, False), (1, 3, None, True), (2, 3, 4, True), (2, 2, 3, False)],
)
def test_random_network_matches_a_plain_recursion(depth, width, chance_width, afterstate):
  env = envs.make("nannon")
  net = stochastic_muzero.StochasticNetwork(env, NetworkConfig(hidden=(16,), latent_dim=8))
  params = net.init(jax.random.PRNGKey(3))
  rng = np.random.default_rng(0)
  obs = jnp.asarray(rng.normal(size=(3,) + tuple(env.observation_shape)), jnp.float32)
  legal = rng.random((3, env.num_actions)) < 0.5
  legal[:, 0] = True
  config = SearchConfig(
    root="expectimax",
    expectimax_depth=depth,
    expectimax_width=width,
    expectimax_chance_width=chance_width,
    expectimax_afterstate=afterstate,
    expectimax_min_prior=0.0,
  )
  got = np.asarray(
    action_values(
      params,
      jax.random.PRNGKey(0),
      root_output(net, params, obs),
      lambda p, k, a, n: recurrent_fn(net, p, k, a, n),
      jnp.asarray(legal),
      num_players=net.num_players,
      flip_opponents=net.flip,
      config=config,
    )
  )
  for i in range(3):
    want = _reference(net, params, obs[i], legal[i], config)
    np.testing.assert_array_equal(np.isinf(got[i]), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[i][finite], want[finite], rtol=1e-4, atol=1e-5)


def test_the_config_plays_it_and_refuses_it_for_self_play():
  path = config_lib.shipped_path("nannon.yaml")
  smz = ["agent=stochastic_muzero"]
  config = config_lib.load(path, smz + ["play_search.root=expectimax"])
  assert (config.search.root, config.playing_search.root) == ("puct", "expectimax")
  with pytest.raises(ValueError, match="does not support search.root other than puct"):
    config_lib.load(path, smz + ["search.root=expectimax", "play_search.root=puct"])
  with pytest.raises(ValueError, match="play_search.root gumbel"):
    config_lib.load(path, smz + ["play_search.root=gumbel"])


def test_the_agent_plays_the_expectimax_on_real_states():
  # Through the agent's `act.SearchFn`, as evaluate and play call it: legal
  # moves only, on a batch of real Nannon states.
  config = tiny.tiny_config(
    "nannon",
    "agent=stochastic_muzero",
    "play_search.root=expectimax",
    "play_search.expectimax_afterstate=true",
  )
  env = config.make_env()
  net = stochastic_muzero.StochasticNetwork(env, config.network)
  params = net.init(jax.random.PRNGKey(0))
  states = jax.vmap(env.reset)(jax.random.split(jax.random.PRNGKey(1), 8))
  assert bool(jnp.all(states.current_player >= 0))
  out = stochastic_muzero.search(
    params,
    states,
    jax.random.PRNGKey(3),
    model=net,
    env=env,
    config=config.playing_search,
    temperature=0.0,
  )
  legal = np.asarray(states.legal_action_mask)
  assert legal[np.arange(8), np.asarray(out.action)].all()
