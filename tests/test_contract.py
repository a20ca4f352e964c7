"""Every registered game passes the contract in `envs.testing`."""

import jax
import pytest

import envs
from envs import testing


@pytest.fixture(params=envs.registered())
def env(request):
  return envs.make(request.param)


def test_shapes_jit_vmap(env):
  testing.check_shapes(env, jax.random.PRNGKey(0))


def test_random_playouts(env):
  for seed in range(2):
    testing.check_playouts(env, jax.random.PRNGKey(seed))


def test_same_key_same_trajectory(env):
  testing.check_determinism(env, jax.random.PRNGKey(3))


def test_keyed_step_samples_chance(env):
  testing.check_keyed_step(env, jax.random.PRNGKey(4))


def test_illegal_action(env):
  testing.check_absorbing_and_illegal(env, jax.random.PRNGKey(5))


def test_render(env):
  assert isinstance(env.render(env.init(jax.random.PRNGKey(0))), str)
  assert env.render(env.reset(jax.random.PRNGKey(0)))


def test_properties(env):
  assert env.payoff in envs.PAYOFF_KINDS
  assert env.id in envs.registered()
  assert env.max_game_length >= 1
  assert isinstance(env.version, int)


def test_make_rejects_unknown():
  with pytest.raises(ValueError, match="registered envs: .*catch"):
    envs.make("no_such_game")
  with pytest.raises(ValueError, match="valid parameters .*rows=10"):
    envs.make("catch", depth=3)
  with pytest.raises(ValueError, match="must be of type int"):
    envs.make("catch", rows="10")
  with pytest.raises(ValueError, match="rows must be >= 2"):
    envs.make("catch", rows=1)
