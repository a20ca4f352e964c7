"""AlphaZero on the true model (anakin_mz/agents/alphazero.py) in the NDMZ search.

A tiny two-player game, `_Fan`, puts a chance node right below the root:

    phase 0: player 0 moves (only action 0 is legal)
    phase 1: chance, outcomes with probabilities PROBS:
      0 -> the end, player 0 wins (+1)       1 -> the end, player 0 loses (-1)
      2 -> player 1 moves (phase 2)          3 -> player 0 moves again (phase 3)
    phases 2 and 3: actions 0 and 1 are legal, each ends the game with 0.

The network is set to value every observation at B (from the mover's view)
with a uniform policy, so every number below is hand-derived.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

import envs
from anakin_mz import config as config_lib
from anakin_mz.agents import alphazero
from anakin_mz.agents.alphazero import TrueModel
from anakin_mz.core import registry
from anakin_mz.core.networks import Network, NetworkConfig
from anakin_mz.core.search import SearchConfig
from envs.core import CHANCE, TERMINAL

PROBS = (0.44, 0.31, 0.16, 0.09)
B = 0.5  # the network's value of every observation, mover's view


@struct.dataclass
class _FanState:
  phase: jax.Array


class _Fan(envs.Game):
  name = "az_fan"
  payoff = "zero_sum"
  max_chance_run = 1
  chance_run_exact = True
  num_players = 2
  num_actions = 3
  num_chance_outcomes = 4
  observation_shape = (5,)
  max_game_length = 10

  def init(self, key):
    del key
    return _FanState(phase=jnp.int32(0))

  def current_player(self, g):
    return jnp.array([0, CHANCE, 1, 0, TERMINAL], jnp.int32)[g.phase]

  def legal_action_mask(self, g):
    t, f = True, False
    table = [[t, f, f], [f, f, f], [t, t, f], [t, t, f], [f, f, f]]
    return jnp.array(table)[g.phase]

  def chance_probs(self, g):
    return jnp.array(PROBS, jnp.float32)

  def apply_action(self, g, action):
    del action
    return _FanState(phase=jnp.where(g.phase == 0, 1, 4).astype(jnp.int32)), jnp.zeros(2)

  def apply_chance(self, g, outcome):
    del g
    phase = jnp.array([4, 4, 2, 3], jnp.int32)[outcome]
    rewards = jnp.array([[1.0, -1.0], [-1.0, 1.0], [0.0, 0.0], [0.0, 0.0]])[outcome]
    return _FanState(phase=phase), rewards

  def observe(self, g, player):
    del player
    return jax.nn.one_hot(g.phase, 5, dtype=jnp.float32)

  def render(self, g):
    return f"phase {int(g.phase)}"


def _model_and_params(env):
  model = TrueModel(env, NetworkConfig(hidden=(4,), latent_dim=4), discount=1.0)
  params = jax.tree.map(jnp.zeros_like, model.init(jax.random.PRNGKey(0)))
  # f's value head (its third dense layer) outputs B everywhere.
  f = params["f"]["params"]
  value_head = sorted(k for k in f if k.startswith("Dense"))[2]
  f[value_head]["bias"] = jnp.full_like(f[value_head]["bias"], B)
  out = model.state_root(params, jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 2)))
  np.testing.assert_allclose(out.value, [B, B])
  return model, params


def _search(num_simulations, batch=2):
  env = envs.Env(_Fan())
  model, params = _model_and_params(env)
  state = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(1), batch))
  config = SearchConfig(
    num_simulations=num_simulations, chance_mode="prior_minus_visits", dirichlet_fraction=0.0
  )
  run = jax.jit(
    lambda p, s, k: alphazero.search(p, s, k, model=model, env=env, config=config, temperature=0.0)
  )
  return run(params, state, jax.random.PRNGKey(2))


def test_chance_node_visits_priors_kinds_and_values_are_exact():
  out = _search(10)
  tree = out.search_tree
  rows = np.arange(2)
  chance = np.asarray(tree.children_index[:, 0, 0])
  # The chance node's children priors are the game's chance_probs exactly.
  prior = jax.nn.softmax(tree.children_prior_logits[rows, chance], axis=-1)
  np.testing.assert_allclose(prior, [PROBS] * 2, rtol=1e-6)
  assert np.all(np.asarray(tree.embeddings.kind)[rows, chance] == 1)
  # Its value is the exact expectation over the outcomes, root mover's view:
  # .44 (+1) + .31 (-1) + .16 (-B: player 1 moves) + .09 (+B) = 0.095.
  np.testing.assert_allclose(tree.raw_values[rows, chance], [0.095] * 2, rtol=1e-5)
  # 9 simulations pass the chance node; argmax(prob - N / (1 + sum N)):
  # [.44 .31 .16 .09] -> 0; [-.06 .31 .16 .09] -> 1; [.107 -.023 .16 .09] -> 2;
  # [.19 .06 -.09 .09] -> 0; [.04 .11 -.04 .09] -> 1; [.107 -.023 -.007 .09]
  # -> 0; [.011 .024 .017 .09] -> 3; [.065 .06 .035 -.035] -> 0;
  # [-.004 .088 .049 -.021] -> 1.
  np.testing.assert_array_equal(tree.children_visits[rows, chance], [[4, 3, 1, 1]] * 2)
  # Node kinds from the game: outcomes 0 and 1 end it, 2 is player 1's turn
  # (relative player 1), 3 player 0's (relative player 0).
  kids = np.asarray(tree.children_index)[rows, chance]
  kinds = np.asarray(tree.embeddings.kind)[rows[:, None], kids]
  players = np.asarray(tree.embeddings.player)[rows[:, None], kids]
  np.testing.assert_array_equal(kinds, [[2, 2, 0, 0]] * 2)
  np.testing.assert_array_equal(players, [[0, 0, 1, 0]] * 2)
  # Root: its raw value B, the chance node's 0.095, then +1 four times, -1
  # three times, -B once (player 1's node) and +B once.
  expected = (B + 0.095 + 4 - 3 - B + B) / 11
  np.testing.assert_allclose(out.root_value, [expected] * 2, rtol=1e-5)
  np.testing.assert_array_equal(out.action, [0, 0])


def test_interior_choice_nodes_play_legal_moves_only():
  out = _search(60, batch=1)
  tree = out.search_tree
  chance = int(tree.children_index[0, 0, 0])
  for outcome in (2, 3):
    node = int(tree.children_index[0, chance, outcome])
    visits = np.asarray(tree.children_visits[0, node])
    assert visits[:2].sum() > 2, visits  # explored ...
    assert visits[2] == 0, visits  # ... and never the illegal move
    # Equal priors over the two legal moves, the masking logit on the third.
    logits = np.asarray(tree.children_prior_logits[0, node])
    assert logits[0] == logits[1] and logits[2] == np.finfo(np.float32).min


def test_config_agent_is_validated():
  with pytest.raises(ValueError, match="valid agents: ndmz, alphazero, tdlambda"):
    config_lib.load("nannon", ["agent=muzero"])
  with pytest.raises(ValueError, match="terminal_nodes"):
    config_lib.load("nannon", ["agent=alphazero", "search.terminal_nodes=false"])
  config = config_lib.load("nannon", ["agent=alphazero"])
  assert config_lib.from_dict(config.to_dict()).agent == "alphazero"
  assert config_lib.load("nannon").agent == "ndmz"


def test_agent_the_game_does_not_support_is_refused(monkeypatch):
  env = envs.make("nannon")
  monkeypatch.setattr(type(env.game), "num_players", 3)
  with pytest.raises(ValueError, match="valid agents for it: ndmz, alphazero"):
    config_lib.load("nannon", ["agent=tdlambda"])


@pytest.mark.parametrize("agent", ["alphazero", "tdlambda"])
def test_true_model_agents_refuse_hidden_chance(agent):
  """gymnax draws chance inside its keyed step: the real game as a model
  would replay the draw carried in the state, the future."""
  pytest.importorskip("gymnax")
  with pytest.raises(ValueError, match="hidden from a model.*valid agents for it: ndmz"):
    config_lib.load("minatar-breakout", [f"agent={agent}"])
  assert config_lib.load("minatar-breakout").agent == "ndmz"


def test_value_player_refuses_hidden_chance():
  """`evaluate.py --player value` looks ahead on the real game as TD(lambda)
  does: refused where TD(lambda) is, before any network call."""
  pytest.importorskip("gymnax")
  config = config_lib.load("minatar-breakout")
  env = config.make_env()
  network = Network(env, config.network)
  with pytest.raises(ValueError, match="--player value .*hidden from a model.*--player search"):
    registry.get("ndmz").value_policy(network, None, env, discount=1.0)


def test_alphazero_learner_trains_policy_and_value_only():
  config = config_lib.load(
    "catch",
    [
      "agent=alphazero",
      "env.params.rows=4",
      "env.params.columns=3",
      "train.num_envs=4",
      "train.rollout_length=4",
      "train.batch_size=8",
      "train.min_replay=0",
      "train.replay_capacity=32",
      "search.num_simulations=4",
      "network.hidden=[8]",
      "network.latent_dim=8",
    ],
  )
  learner = registry.make_learner(config)
  assert isinstance(learner.network, TrueModel)
  state = learner.init(jax.random.PRNGKey(0))
  new, metrics = learner.jit_step(learner.jit_step(jax.tree.map(jnp.copy, state))[0])
  terms = {"value", "policy", "l2", "total", "loss", "grad_norm", "params"}
  assert set(metrics["nonfinite"]) == terms  # no reward, chance or identity term
  assert int(new.update_step) >= learner.updates_per_chunk
  changed = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), new.params, state.params)
  assert all(jax.tree.leaves(changed["h"]))
  heads = changed["f"]["params"]  # f's heads: policy, chance, value
  assert heads["Dense_0"]["bias"] and heads["Dense_2"]["bias"]
  assert not heads["Dense_1"]["bias"]  # the chance head has no loss (L2 aside)
  assert not any(jax.tree.leaves(changed["g"]))  # no dynamics: g is never trained
