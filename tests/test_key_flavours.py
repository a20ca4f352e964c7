"""Both JAX key flavours, everywhere a key goes in beyond the games
themselves (those are in test_contract.py): the bots, the match loop, our
games through pgx's and gymnax's APIs, the search, self-play and every
learner's `init`. The same key data gives the same result in either
flavour (`envs.raw_key`)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

import envs
import envs.bots
from anakin_mz import config as config_lib
from anakin_mz.core.registry import make_learner
from anakin_mz.eval.match import play_match
from anakin_mz.agents.ppo import PPO
from anakin_mz.core.selfplay import init_actors


def _same_in_both_flavours(fn, seed=1):
  raw = fn(jax.random.PRNGKey(seed))
  typed = fn(jax.random.key(seed))
  leaves_raw, leaves_typed = jax.tree.leaves(raw), jax.tree.leaves(typed)
  assert len(leaves_raw) == len(leaves_typed) > 0
  for a, b in zip(leaves_raw, leaves_typed):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize(
  "game,spec",
  [
    ("nannon", "optimal"),
    # The contract suite runs every game's own functions in both flavours;
    # these bots cost 15-20 s each to compile twice, so they run with -m slow.
    pytest.param("einstein", "expectiminimax:1", marks=pytest.mark.slow),
    pytest.param("breakthrough", "mcts:4", marks=pytest.mark.slow),
    pytest.param("carchess", "greedy", marks=pytest.mark.slow),
    ("catch", "random"),
  ],
)
def test_bots_and_the_match_loop(game, spec):
  env = envs.make(game)
  _, bot = envs.bots.make_bot(spec, env)

  def run(key):
    states = jax.vmap(env.reset)(jax.random.split(key, 4))
    return bot(states, key), play_match(env, bot, envs.random_policy, key, 4)

  _same_in_both_flavours(run)


def test_our_games_through_pgx_and_gymnax():
  env = envs.make("nannon")
  pgx_env = envs.to_pgx(env)

  def pgx_run(key):
    state = pgx_env.init(key)
    return pgx_env.step(state, jnp.argmax(state.legal_action_mask), key)

  _same_in_both_flavours(pgx_run)
  gymnax_env, params = envs.to_gymnax(env)

  def gymnax_run(key):
    obs, state = gymnax_env.reset(key, params)
    return obs, gymnax_env.step(key, state, 0, params)

  _same_in_both_flavours(gymnax_run)


@pytest.mark.parametrize(
  "agent",
  [
    "ndmz",
    # The others take their keys through the same learner base (one seam,
    # `envs.raw_key` in init): -m slow.
    pytest.param("alphazero", marks=pytest.mark.slow),
    pytest.param("stochastic_muzero", marks=pytest.mark.slow),
    pytest.param("tdlambda", marks=pytest.mark.slow),
  ],
)
def test_learner_init_and_search(agent):
  learner = make_learner(tiny.tiny_config("nannon", f"agent={agent}"))
  _same_in_both_flavours(learner.init)
  _same_in_both_flavours(lambda k: init_actors(learner.env, k, 4))
  params = learner.init(jax.random.PRNGKey(0)).params
  states = jax.vmap(learner.env.reset)(jax.random.split(jax.random.PRNGKey(2), 3))
  # Self-play's search, then the one that plays (Nannon's: the expectimax,
  # `smz_expectimax` for Stochastic MuZero).
  for config, temperature in ((learner.config.search, 1.0), (learner.config.playing_search, 0.0)):
    search = lambda k: learner.agent.search(
      params,
      states,
      k,
      model=learner.network,
      env=learner.env,
      config=config,
      temperature=temperature,
    )
    _same_in_both_flavours(search)


def test_ppo_init():
  sizes = ["train.num_envs=4", "train.rollout_length=4", "network.hidden=[8]"]
  ppo = PPO(envs.make("catch"), config_lib.load("catch", ["agent=ppo", *sizes]))
  _same_in_both_flavours(ppo.init)
