"""TD(lambda) (anakin_mz/agents/tdlambda.py): the online update against a hand
computation of Sutton & Barto's eligibility trace, the 1- and 2-ply
expectimax on a hand-built position, and a run through the shared loop and checkpoints."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import struct

import envs
from anakin_mz.core import registry
from anakin_mz.runtime import restore
from anakin_mz import config as config_lib
from anakin_mz.runtime import run as run_lib
from anakin_mz.eval import periodic, report
from anakin_mz.core.networks import Network, NetworkConfig
from anakin_mz.core.search import SearchConfig
from anakin_mz.agents.tdlambda import (
  ValueModel,
  expectimax,
  init_lanes,
  td_end,
  td_learn,
  td_transition,
  td_visit,
)
from envs.core import CHANCE, TERMINAL

# Long programs (TD(lambda) trains many steps), not long compiles: XLA's
# full optimisation (conftest.py).
pytestmark = pytest.mark.optimized


def _linear_model(env, kernel, bias=0.0):
  model = ValueModel(env, NetworkConfig(hidden=()), discount=1.0)
  params = model.init(jax.random.PRNGKey(0))
  dense = params["params"]["Dense_0"]
  dense["kernel"] = jnp.asarray(kernel, jnp.float32).reshape(dense["kernel"].shape)
  dense["bias"] = jnp.full_like(dense["bias"], bias)
  return model, params


def test_td_lambda_update_matches_hand_computed_trace():
  """A three-step episode S0 (player 0), S1 (player 1), S2 (player 0), then
  the end, on a linear value V(x) = w.x + b of player-0 value U = sign V;
  lane 1 sits at a chance node throughout and must not count."""
  gamma, lam, alpha = 0.9, 0.7, 0.1
  env = envs.make("catch", rows=2, columns=2)  # any 4-feature observation
  w0, b0 = np.array([0.1, -0.2, 0.3, 0.05]), 0.02
  model, params = _linear_model(env, w0, b0)
  rng = np.random.default_rng(0)
  xs = rng.uniform(-1, 1, size=(3, 4)).astype(np.float32)
  signs = [1.0, -1.0, 1.0]
  # Player 0's rewards of the transitions after S0, S1 and S2 (k = 2, 2, 1).
  rewards = [[0.25, 0.0], [0.0, -0.5], [1.0]]

  # By hand (Sutton & Barto 12.2, semi-gradient TD(lambda), with k
  # transitions between decision nodes: gamma^k).
  w, b = w0.copy(), b0
  e_w, e_b = np.zeros(4), 0.0
  v = lambda x: w @ x + b
  deltas = []
  for t in range(3):
    k = len(rewards[t])
    decay = lam * gamma ** len(rewards[t - 1]) if t else 0.0
    e_w, e_b = decay * e_w + signs[t] * xs[t], decay * e_b + signs[t]
    big_r = sum(gamma**i * r for i, r in enumerate(rewards[t]))
    u_next = signs[t + 1] * v(xs[t + 1]) if t < 2 else 0.0
    delta = big_r + gamma**k * u_next - signs[t] * v(xs[t])
    deltas.append(delta)
    w, b = w + alpha * delta * e_w, b + alpha * delta * e_b

  # The same episode through the module, as the learner drives it.
  sgd = optax.sgd(alpha)
  opt_state = sgd.init(params)
  lanes = init_lanes(params, env.observation_shape, 2)
  obs = lambda x: jnp.stack([jnp.asarray(x).reshape(2, 2, 1), jnp.zeros((2, 2, 1))])
  players = [0, 1, 0, TERMINAL]
  got = []
  for t in range(4):
    player = jnp.array([players[t], CHANCE])
    x = xs[t] if t < 3 else np.zeros(4)
    if t:
      params, opt_state, info = td_learn(
        params, opt_state, lanes, player, obs(x), model=model, optimizer=sgd, payoff="zero_sum"
      )
      np.testing.assert_array_equal(info["valid"], [True, False])
      got.append(float(info["delta"][0]))
    if t < 3:
      lanes = td_visit(
        params, lanes, player, obs(x), model=model, trace_decay=lam, payoff="zero_sum"
      )
      for r in rewards[t]:
        lanes = td_transition(lanes, jnp.array([True, False]), jnp.array([r, 0.0]), gamma)
  np.testing.assert_allclose(got, deltas, rtol=1e-5)
  dense = params["params"]["Dense_0"]
  np.testing.assert_allclose(dense["kernel"][:, 0], w, rtol=1e-5)
  np.testing.assert_allclose(dense["bias"][0], b, rtol=1e-5)
  # The trace before the last update, and the lane that never arrived.
  np.testing.assert_allclose(lanes.trace["params"]["Dense_0"]["kernel"][0, :, 0], e_w, rtol=1e-5)
  np.testing.assert_array_equal(lanes.trace["params"]["Dense_0"]["kernel"][1], 0.0)
  lanes = td_end(lanes, jnp.array([True, False]))
  assert not bool(lanes.has_prev[0])
  np.testing.assert_array_equal(lanes.trace["params"]["Dense_0"]["kernel"][0], 0.0)


@struct.dataclass
class _GambleState:
  phase: jax.Array


class _Gamble(envs.Game):
  """Player 0 chooses: 0 gambles (chance: 1/4 player 1 moves, 3/4 player 0
  moves again), 1 takes +0.2 and ends the game, 2 hands player 1 the move.
  Phases 2 (player 1) and 3 (player 0) end the game with any move."""

  name = "td_gamble"
  payoff = "zero_sum"
  max_chance_run = 1
  chance_run_exact = True
  num_players = 2
  num_actions = 3
  num_chance_outcomes = 2
  observation_shape = (5,)
  max_game_length = 10

  def init(self, key):
    del key
    return _GambleState(phase=jnp.int32(0))

  def current_player(self, g):
    return jnp.array([0, CHANCE, 1, 0, TERMINAL], jnp.int32)[g.phase]

  def legal_action_mask(self, g):
    return jnp.array([True, True, True]) & (g.phase != 1) & (g.phase != 4)

  def chance_probs(self, g):
    return jnp.array([0.25, 0.75], jnp.float32)

  def apply_action(self, g, action):
    phase = jnp.where(g.phase == 0, jnp.array([1, 4, 2])[action], 4).astype(jnp.int32)
    won = (g.phase == 0) & (action == 1)
    return _GambleState(phase=phase), jnp.where(won, jnp.array([0.2, -0.2]), 0.0)

  def apply_chance(self, g, outcome):
    del g
    return _GambleState(phase=jnp.array([2, 3], jnp.int32)[outcome]), jnp.zeros(2)

  def observe(self, g, player):
    del player
    return jax.nn.one_hot(g.phase, 5, dtype=jnp.float32)

  def render(self, g):
    return f"phase {int(g.phase)}"


def test_expectimax_averages_the_chance_outcomes():
  env = envs.Env(_Gamble())
  state = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
  model, _ = _linear_model(env, np.zeros(5))
  # The one policy contract plays expectimax's move.
  policy = jax.jit(
    lambda p, s: (
      expectimax(model, p, s),
      registry.get("tdlambda").search_policy(model, p, env, SearchConfig())(
        s, jax.random.PRNGKey(0)
      ),
    )
  )
  # V by phase, mover's view: phase 2 is player 1's (so -V for player 0).
  for v2, v3, action, value in (
    # gamble .25 * .4 + .75 * .1 = .175, sure .2, hand over .4
    (-0.4, 0.1, 2, 0.4),
    # gamble .25 * .1 + .75 * .3 = .25, sure .2, hand over .1
    (-0.1, 0.3, 0, 0.25),
    # gamble .25 * .1 + .75 * .1 = .1, sure .2, hand over .1
    (-0.1, 0.1, 1, 0.2),
  ):
    _, params = _linear_model(env, [0.0, 0.0, v2, v3, 0.0])
    out, played = policy(params, state)
    assert int(out.action[0]) == action and int(played[0]) == action
    np.testing.assert_allclose(out.root_value, [value], rtol=1e-6)
    # Two moves deep it sees that any move at phase 2 or 3 ends the game
    # with nothing: gamble 0, hand over 0, so the sure +0.2 whatever V says.
    deep = jax.jit(lambda p, s: expectimax(model, p, s, 2))(params, state)
    assert int(deep.action[0]) == 1
    np.testing.assert_allclose(deep.root_value, [0.2], rtol=1e-6)


def test_tdlambda_runs_through_the_shared_loop_and_checkpoints(tmp_path):
  config = config_lib.load(
    "catch",
    [
      "agent=tdlambda",
      "env.params.rows=4",
      "env.params.columns=3",
      "network.hidden=[16]",
      "train.num_envs=4",
      "train.rollout_length=8",
      "train.eval_every=16",
      "train.eval_games=8",
      "train.checkpoint_every=16",
    ],
  )
  learner = registry.make_learner(config)
  assert learner.updates_per_chunk == 8
  result = run_lib.train(
    config, logdir=str(tmp_path), max_updates=16, progress=False, evaluate=periodic.evaluate
  )
  # An update per iteration where some lane reached a decision node or the
  # end with a previous decision node: fewer than 8 per chunk.
  step = int(result.state.update_step)
  assert 16 <= step < 24 and result.saved_step == step
  assert sum(row["episodes"] for row in result.history) >= 4
  assert [e["update_step"] for e in result.evals] == [0, step]
  loaded = restore.load_agent(result.checkpoint_dir)
  assert loaded.step == step and isinstance(loaded.network, ValueModel)
  state = jax.jit(jax.vmap(loaded.env.reset))(jax.random.split(jax.random.PRNGKey(3), 4))
  policy = jax.jit(loaded.search_policy(loaded.config.search))
  expected = jax.jit(lambda p, s: expectimax(loaded.network, p, s).action)(loaded.params, state)
  np.testing.assert_array_equal(policy(state, jax.random.PRNGKey(0)), expected)
  # evaluate.py's report plays it and names it.
  r = report.evaluate_checkpoint(result.checkpoint_dir, games=4, extra=False)
  assert r["algorithm"] == "tdlambda" and r["step"] == step
  # No tree, so no simulations in the record (the config's search section has some).
  assert r["simulations"] == 0 and loaded.config.search.num_simulations > 0
  assert "agent       tdlambda search, 1-ply expectimax" in report.format_report(r)
  # search.expectimax_depth is its play-time search budget.
  r = report.evaluate_checkpoint(
    result.checkpoint_dir, games=4, extra=False, search_overrides=["expectimax_depth=2"]
  )
  assert r["expectimax_depth"] == 2 and r["simulations"] == 0
  assert "agent       tdlambda search, 2-ply expectimax" in report.format_report(r)


def test_value_policy_plays_a_network_value_head_in_the_same_expectimax():
  """`AgentSpec.value_policy` (evaluate.py --player value) on an NDMZ network: the
  1-ply expectimax of `expectimax` above, with the network's value head."""
  env = envs.Env(_Gamble())
  network = Network(env, NetworkConfig(hidden=(8,), latent_dim=8))
  params = network.init(jax.random.PRNGKey(1))
  state = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
  # V by phase, each from its observation's view (the mover's at phase 2
  # and 3): phase 2 is player 1's, so -V2 for player 0.
  v = network.root(params, jax.nn.one_hot(jnp.arange(5), 5)).value
  expected = np.array([0.25 * -v[2] + 0.75 * v[3], 0.2, -v[2]])
  policy = registry.get("ndmz").value_policy(network, params, env, discount=1.0)
  values = jax.jit(policy.action_values)(state)
  np.testing.assert_allclose(values[0], expected, rtol=1e-5, atol=1e-6)
  action = jax.jit(policy)(state, jax.random.PRNGKey(0))
  assert int(action[0]) == int(np.argmax(expected))
