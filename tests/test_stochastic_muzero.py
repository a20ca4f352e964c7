"""Stochastic MuZero (anakin_mz/agents/stochastic_muzero.py): the search's value sign
and the loss on hand-set models, the straight-through code, the decision
unroll's targets on a hand-built buffer, and runs through the shared loop.

Hand-set models: every kernel 0, so each net outputs its last layers' biases
(SELU(0) = 0, and a constant latent min-max scales to 0): every state has
policy logits P, value V; every afterstate value Q, code prior logits SIGMA;
every chance step reward R and turn logits TURN; the encoder logits ENC.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
import tiny
from anakin_mz.core import registry
from anakin_mz.runtime import restore
from anakin_mz import config as config_lib
from anakin_mz.core import replay as replay_lib
from anakin_mz.runtime import run as run_lib
from anakin_mz.eval import report, search_tree
from anakin_mz.core.loss import LossConfig
from anakin_mz.core.networks import NetworkConfig
from anakin_mz.core.search import SearchConfig
from anakin_mz.agents.stochastic_muzero import (
  DecisionBatch,
  StochasticNetwork,
  decisions_at,
  prepare_decisions,
  smz_loss,
  smz_search,
  straight_through_code,
)
from envs.core import CHANCE, TERMINAL

V, Q, R = 0.3, -0.4, 0.5
SAME, CHANGES = (3.0, 0.0), (0.0, 3.0)  # turn logits: the mover stays / changes


def _hand_set(env, *, turn, codes=0):
  """A network on `env` whose nets output only the biases above."""
  net = StochasticNetwork(env, NetworkConfig(hidden=(4,), latent_dim=3, chance_codes=codes))
  params = jax.tree.map(jnp.zeros_like, net.init(jax.random.PRNGKey(0)))

  def bias(name, dense, values):
    layer = params[name]["params"][dense]
    layer["bias"] = jnp.asarray(values, jnp.float32).reshape(layer["bias"].shape)

  a, c = net.num_actions, net.num_codes
  bias("f", "Dense_0", [4.0] + [0.0] * (a - 1))  # P: action 0 is favoured
  bias("f", "Dense_1", [V])
  bias("psi", "Dense_0", [Q])
  bias("psi", "Dense_1", [0.0] * (c - 1) + [2.0])  # SIGMA: the last code
  bias("g", "Dense_1", [R])
  bias("g", "Dense_2", turn)
  bias("e", "Dense_0", [1.0] + [0.0] * (c - 1))  # ENC: code 0
  return net, params


def _search(env, net, params, num_simulations):
  obs = jnp.zeros((2,) + tuple(env.observation_shape), jnp.float32)
  legal = jnp.ones((2, env.num_actions), jnp.bool_)
  config = SearchConfig(num_simulations=num_simulations, dirichlet_fraction=0.0)
  run = jax.jit(lambda p, k: smz_search(p, k, net, obs, legal, config=config, temperature=0.0))
  return run(params, jax.random.PRNGKey(0))


@pytest.mark.parametrize(
  "game, turn, sign",
  [("nannon", CHANGES, -1.0), ("nannon", SAME, 1.0), ("catch", CHANGES, 1.0)],
)
def test_search_backs_up_with_the_turn_heads_sign(game, turn, sign):
  # Simulation 1 expands action 0's afterstate (the prior dominates, every
  # Q is unvisited), simulation 2 goes down action 0 again (its normalised
  # Q is >= 0 and its prior ~1) and expands the chance node's most likely
  # code (argmax sigma / (N + 1): the last one) into a state. That state's
  # value V reaches the afterstate as R + sign * V: sign -1 where the turn
  # head says the mover changes in a zero-sum game, +1 where it stays, and
  # +1 in a one-player game whatever the head says.
  env = envs.make(game)
  net, params = _hand_set(env, turn=turn)
  out = _search(env, net, params, num_simulations=2)
  tree = out.search_tree
  np.testing.assert_array_equal(out.action, [0, 0])
  np.testing.assert_array_equal(tree.children_visits[:, 0], [[2] + [0] * (env.num_actions - 1)] * 2)
  afterstate = int(tree.children_index[0, 0, 0])
  chance_q = R + sign * V
  np.testing.assert_allclose(tree.node_values[:, afterstate], [(Q + chance_q) / 2] * 2, rtol=1e-6)
  np.testing.assert_allclose(out.root_value, [(V + Q + chance_q) / 3] * 2, rtol=1e-6)
  state = tree.node_visits.shape[1] - 1  # node 2, below the afterstate
  assert bool(tree.embeddings.is_decision_node[0, 0]) and bool(
    tree.embeddings.is_decision_node[0, state]
  )
  assert not bool(tree.embeddings.is_decision_node[0, afterstate])
  np.testing.assert_allclose(tree.raw_values[:, state], [V, V], rtol=1e-6)
  # Action weights: the visit distribution over the legal moves.
  np.testing.assert_allclose(out.action_weights[:, 0], [1.0, 1.0])


def test_loss_on_a_hand_built_batch_matches_a_hand_computation():
  env = envs.make("nannon")
  net, params = _hand_set(env, turn=(0.5, -0.5), codes=3)
  n, k, a = 2, 2, env.num_actions
  rng = np.random.default_rng(0)
  policy = rng.dirichlet(np.ones(a), size=(n, k + 1)).astype(np.float32)
  batch = DecisionBatch(
    observation=jnp.asarray(rng.normal(size=(n,) + env.observation_shape), jnp.float32),
    actions=jnp.array([[0, 1], [2, 3]], jnp.int32),
    next_observation=jnp.asarray(rng.normal(size=(n, k) + env.observation_shape), jnp.float32),
    target_value=jnp.array([[1.0, -1.0, 1.0], [0.5, 0.0, 0.0]]),
    target_reward=jnp.array([[0.0, 1.0], [-1.0, 0.0]]),
    target_policy=jnp.asarray(policy),
    policy_mask=jnp.array([[True, True, True], [True, True, False]]),
    target_turn=jnp.array([[1, 0], [0, 0]], jnp.int32),
  )
  config = LossConfig(commitment_weight=0.25, chance_weight=2.0, l2=1e-3)
  loss, m = jax.jit(lambda p, b: smz_loss(p, net, b, config))(params, batch)

  z, u = np.asarray(batch.target_value), np.asarray(batch.target_reward)
  log_softmax = lambda x: np.asarray(x) - np.log(np.sum(np.exp(x)))
  logp = log_softmax([4.0] + [0.0] * (a - 1))
  mask = np.asarray(batch.policy_mask)
  enc = np.exp(log_softmax([1.0, 0.0, 0.0]))  # the encoder's softmax; its code is 0
  expected = {
    "value": np.mean(np.sum((V - z) ** 2, -1)),
    "q": np.mean(np.sum((Q - z[:, :k]) ** 2, -1)),
    "reward": np.mean(np.sum((R - u) ** 2, -1)),
    "policy": np.mean(np.sum(np.where(mask, -np.sum(policy * logp, -1), 0.0), -1)),
    "sigma": k * -log_softmax([0.0, 0.0, 2.0])[0],
    "commitment": k * np.sum((np.array([1.0, 0.0, 0.0]) - enc) ** 2),
    "turn": np.mean(np.sum(-log_softmax([0.5, -0.5])[np.asarray(batch.target_turn)], -1)),
  }
  for name, value in expected.items():
    np.testing.assert_allclose(m[name], value, rtol=1e-5, err_msg=name)
  assert float(m["l2"]) == 0.0  # every kernel is 0
  total = (
    expected["value"]
    + expected["q"]
    + expected["reward"]
    + expected["policy"]
    + 2.0 * expected["sigma"]
    + 0.25 * expected["commitment"]
    + expected["turn"]
  )
  np.testing.assert_allclose(loss, total, rtol=1e-5)
  np.testing.assert_allclose(m["turn_accuracy"], 0.75)  # the head always says "same"
  np.testing.assert_allclose(m["code_usage"], 1 / 3)


def test_straight_through_code_is_one_hot_and_passes_the_softmax_gradient():
  logits = jnp.array([[0.3, 1.2, -0.5, 0.1], [2.0, 0.0, 0.0, 1.9]])
  code, probs = straight_through_code(logits)
  np.testing.assert_array_equal(code, [[0, 1, 0, 0], [1, 0, 0, 0]])
  np.testing.assert_allclose(probs, jax.nn.softmax(logits), rtol=1e-6)
  w = jnp.array([1.0, -2.0, 0.5, 3.0])
  through_code = jax.grad(lambda x: jnp.sum(straight_through_code(x)[0] * w))(logits)
  through_softmax = jax.grad(lambda x: jnp.sum(jax.nn.softmax(x) * w))(logits)
  np.testing.assert_allclose(through_code, through_softmax, rtol=1e-6)
  assert np.all(np.abs(np.asarray(through_code)) > 0)


def test_the_encoder_learns_through_the_dynamics():
  # The loss's gradient reaches e's kernels through the code g reads. One
  # step (K = 1), so that sigma^0 does not read a code (sigma^1 would, via
  # s^1 = g(as^0, c^1)).
  env = envs.make("nannon")
  net = StochasticNetwork(env, NetworkConfig(hidden=(8,), latent_dim=4))
  params = net.init(jax.random.PRNGKey(1))
  n, k = 3, 1
  keys = jax.random.split(jax.random.PRNGKey(2), 3)
  batch = DecisionBatch(
    observation=jax.random.normal(keys[0], (n,) + env.observation_shape),
    actions=jnp.zeros((n, k), jnp.int32),
    next_observation=jax.random.normal(keys[1], (n, k) + env.observation_shape),
    target_value=jax.random.normal(keys[2], (n, k + 1)),
    target_reward=jnp.ones((n, k)),
    target_policy=jnp.full((n, k + 1, env.num_actions), 1.0 / env.num_actions),
    policy_mask=jnp.ones((n, k + 1), jnp.bool_),
    target_turn=jnp.ones((n, k), jnp.int32),
  )
  loss = lambda p, **w: smz_loss(p, net, batch, LossConfig(l2=0.0, **w))[0]

  def kernel(**w):
    # Jitted: op by op, the three gradients compiled hundreds of tiny programs.
    grads = jax.jit(jax.grad(lambda p: loss(p, **w)))(params)
    return grads["e"]["params"]["Dense_0"]["kernel"]

  # Through the code g reads: no commitment, the value, reward, policy and
  # turn terms after the chance step move e.
  assert float(jnp.abs(kernel(commitment_weight=0.0)).sum()) > 0
  # sigma holds the code fixed: alone it leaves e alone; the commitment does not.
  others = dict(value_weight=0.0, reward_weight=0.0, policy_weight=0.0, identity_weight=0.0)
  assert not np.any(np.asarray(kernel(commitment_weight=0.0, **others)))
  assert float(jnp.abs(kernel(chance_weight=0.0, **others)).sum()) > 0


def _transition(player, action, rewards, next_player, done, obs):
  return dict(
    observation=np.full((3,), obs, np.float32),
    player=player,
    action=action,
    rewards=np.asarray(rewards, np.float32),
    search_policy=np.eye(4, dtype=np.float32)[action % 4] if player >= 0 else np.zeros(4),
    search_value=0.0,
    chance_probs=np.zeros(2, np.float32),
    next_player=next_player,
    done=done,
    truncated=False,
    valid=True,
  )


def test_decision_unroll_pairs_each_move_with_the_chance_run_after_it():
  A = 4  # actions; chance outcomes are A + c
  steps = [
    _transition(CHANCE, A + 1, [0, 0], 0, False, 0),  # 0 opening roll
    _transition(0, 2, [0, 0], CHANCE, False, 1),  # 1 player 0 moves
    _transition(CHANCE, A + 0, [0, 0], 1, False, 2),  # 2 roll
    _transition(1, 1, [0, 0], CHANCE, False, 3),  # 3 player 1 moves
    _transition(CHANCE, A + 1, [0, 0], CHANCE, False, 4),  # 4 player 0 forfeits
    _transition(CHANCE, A + 0, [0, 0], 1, False, 5),  # 5 roll: player 1 again
    _transition(1, 3, [-1, 1], TERMINAL, True, 6),  # 6 player 1 wins
    _transition(CHANCE, A + 1, [0, 0], 0, False, 7),  # 7 new game
    _transition(0, 0, [0, 0], CHANCE, False, 8),  # 8
    _transition(CHANCE, A + 0, [0, 0], 1, False, 9),  # 9
    _transition(1, 2, [0, 0], CHANCE, False, 10),  # 10 the data stops here
  ]
  chunk = jax.tree.map(lambda *x: jnp.asarray(np.stack(x))[:, None], *steps)
  chunk = replay_lib.Transition(**chunk)
  buffer = replay_lib.add(
    replay_lib.init_buffer(jax.tree.map(lambda x: x[0, 0], chunk), 12, 1), chunk
  )
  prepared = replay_lib.prepare(buffer, K=2, num_players=2, payoff="zero_sum")
  dp = prepare_decisions(prepared, K=2)
  # Decisions whose next two decisions are known, or whose game ends first.
  np.testing.assert_array_equal(np.nonzero(np.asarray(dp.start_ok[:, 0]))[0], [1, 3, 6])
  starts = replay_lib.Starts(
    i=jnp.array([1, 3]), lane=jnp.array([0, 0]), row=jnp.arange(2), key=jax.random.PRNGKey(0)
  )
  b = decisions_at(dp, starts, batch_size=2, K=2, num_actions=A)
  np.testing.assert_array_equal(b.observation[:, 0], [1, 3])
  np.testing.assert_array_equal(b.actions[0], [2, 1])
  assert int(b.actions[1, 0]) == 1 and 0 <= int(b.actions[1, 1]) < A  # past the end: random
  np.testing.assert_array_equal(b.next_observation[..., 0], [[3, 6], [6, 0]])
  # Values from each decision's mover's view: player 0 lost, player 1 won.
  np.testing.assert_array_equal(b.target_value, [[-1, 1, 1], [1, 1, 0]])
  # Rewards from d_k to d_{k+1}, d_k's mover's view: the win at step 6.
  np.testing.assert_array_equal(b.target_reward, [[0, 0], [0, 1]])
  # The mover changes 1 -> 3 (player 0 -> 1), not 3 -> 6 (player 1 twice).
  np.testing.assert_array_equal(b.target_turn, [[1, 0], [0, 0]])
  np.testing.assert_array_equal(b.policy_mask, [[True, True, True], [True, True, False]])
  np.testing.assert_array_equal(b.target_policy[0, :, :], np.eye(4)[[2, 1, 3]])


def test_config_validation_names_stochastic_muzero():
  with pytest.raises(
    ValueError, match="valid agents: ndmz, alphazero, tdlambda, stochastic_muzero"
  ):
    config_lib.load(tiny.config_path("nannon"), ["agent=muzero"])
  with pytest.raises(ValueError, match="does not support train.reanalyse_fraction"):
    config_lib.load(
      tiny.config_path("nannon"), ["agent=stochastic_muzero", "train.reanalyse_fraction=0.5"]
    )
  config = config_lib.load(tiny.config_path("nannon"), ["agent=stochastic_muzero"])
  assert config_lib.from_dict(config.to_dict()).agent == "stochastic_muzero"


def _catch(*extra):
  return config_lib.load(
    tiny.config_path("catch"),
    list(tiny.TINY)
    + ["agent=stochastic_muzero", "env.params.rows=4", "env.params.columns=3"]
    + list(extra),
  )


@pytest.mark.slow  # ~50 s on a loaded 2-core CPU: compiling the Anakin step
def test_learner_steps_are_finite_and_the_same_seed_gives_the_same_result():
  learner = registry.make_learner(_catch())
  assert isinstance(learner.network, StochasticNetwork)

  def run(seed):
    state = learner.init(jax.random.PRNGKey(seed))
    history = []
    for _ in range(3):
      state, metrics = learner.jit_step(state)
      history.append(metrics)
    return state, history

  state, history = run(0)
  again, _ = run(0)
  other, _ = run(1)
  assert int(state.update_step) > 0
  terms = ("value", "q", "reward", "policy", "sigma", "commitment", "turn", "loss")
  for m in history[1:]:
    assert all(np.isfinite(float(m[t])) for t in terms)
    assert not any(bool(v) for v in m["nonfinite"].values())
  same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), state.params, again.params)
  assert all(jax.tree.leaves(same))
  differ = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), state.params, other.params)
  assert not all(jax.tree.leaves(differ))
  changed = jax.tree.map(
    lambda a, b: bool(jnp.any(a != b)), state.params, learner.init(jax.random.PRNGKey(0)).params
  )
  assert all(any(jax.tree.leaves(changed[name])) for name in ("h", "f", "phi", "psi", "g", "e"))


@pytest.mark.slow
def test_stochastic_muzero_runs_through_the_shared_loop_and_checkpoints(tmp_path):
  config = _catch("train.checkpoint_every=8", "train.eval_every=8")
  result = run_lib.train(config, logdir=str(tmp_path), max_updates=8, progress=False)
  step = int(result.state.update_step)
  assert step >= 8 and result.saved_step == step
  assert all(np.isfinite(row["loss"]) for row in result.history if "loss" in row)
  loaded = restore.load_agent(result.checkpoint_dir)
  assert loaded.step == step and isinstance(loaded.network, StochasticNetwork)
  state = jax.vmap(loaded.env.reset)(jax.random.split(jax.random.PRNGKey(3), 4))
  policy = loaded.search_policy(loaded.config.search)
  moves = policy(state, jax.random.PRNGKey(0))
  assert bool(jnp.all(jnp.take_along_axis(state.legal_action_mask, moves[:, None], axis=1)))
  greedy = loaded.greedy_policy()(state, jax.random.PRNGKey(0))
  assert greedy.shape == (4,)
  # evaluate.py's report plays it and names it; show_search refuses it clearly.
  r = report.evaluate_checkpoint(result.checkpoint_dir, games=4, extra=False)
  assert r["algorithm"] == "stochastic_muzero" and r["step"] == step
  with pytest.raises(ValueError, match="draws the NDMZ search tree"):
    search_tree.show(loaded)
