"""Every registered game passes the contract in `envs.testing`."""

import jax
import numpy as np
import pytest

import envs
from envs import testing


# The adapted games (gymnax, pgx) compile slowly on CI's 2 cores: the fast
# suite checks one of each kind; the rest run with -m slow.
FAST_ADAPTED = ("minatar-breakout", "pgx-connect_four", "pgx-tic_tac_toe")

# Our games through pgx's and gymnax's APIs and back (`to_pgx`, `to_gymnax`
# then `from_pgx`, `from_gymnax`): the reverse adapters keep the contract.
ROUND_TRIPS = {
  "to_pgx(nannon)": lambda: envs.from_pgx(envs.to_pgx(envs.make("nannon"))),
  "to_pgx(breakthrough)": lambda: envs.from_pgx(envs.to_pgx(envs.make("breakthrough"))),
  "to_gymnax(catch)": lambda: envs.from_gymnax(*envs.to_gymnax(envs.make("catch"))),
}
# The fast suite keeps the round trip that carries chance through pgx's key;
# the two without chance run with -m slow (35 s of CI's core-seconds). Their
# adapters stay in the fast suite (test_adapters.py): `to_pgx(breakthrough)`
# passes pgx's own API test, `to_gymnax(catch)` follows gymnax's interface.
FAST_ROUND_TRIPS = ("to_pgx(nannon)",)


def _env_params():
  for name in envs.registered():
    adapted = name.startswith(("minatar-", "pgx-"))
    marks = [pytest.mark.slow] if adapted and name not in FAST_ADAPTED else []
    yield pytest.param(name, marks=marks, id=name)
  for name in ROUND_TRIPS:
    marks = [] if name in FAST_ROUND_TRIPS else [pytest.mark.slow]
    yield pytest.param(name, marks=marks, id=name)


@pytest.fixture(params=list(_env_params()))
def env(request):
  if request.param in ROUND_TRIPS:
    return ROUND_TRIPS[request.param]()
  return envs.make(request.param)


# Both JAX key flavours: raw `PRNGKey`s and typed `key`s (JAX's recommended
# flavour; pgx and gymnax accept both). Every check runs under each with
# -m slow; the fast suite runs them under typed keys, the flavour that once
# crashed every game, since the rest of the suite draws raw `PRNGKey`s
# throughout and `test_key_flavours_play_the_same_game` below shows both
# flavours give the same bits through every entry point (the doubled
# matrix was 170 s of CI's 2,200 core-seconds).
@pytest.fixture(params=[pytest.param("PRNGKey", marks=pytest.mark.slow), "key"])
def key(request):
  return getattr(jax.random, request.param)


def test_shapes_jit_vmap(env, key):
  testing.check_shapes(env, key(0))


def test_random_playouts(env, key):
  for seed in range(2):
    testing.check_playouts(env, key(seed))


def test_same_key_same_trajectory(env, key):
  testing.check_determinism(env, key(3))


def test_keyed_step_samples_chance(env, key):
  testing.check_keyed_step(env, key(4))


def test_illegal_action(env, key):
  testing.check_absorbing_and_illegal(env, key(5))


def test_hidden_chance(env, key):
  testing.check_hidden_chance(env, key(9))


def test_render(env, key):
  assert isinstance(env.render(env.init(key(0))), str)
  assert env.render(env.reset(key(0)))


def test_key_flavours_play_the_same_game(env):
  # The same key data gives the same result in either flavour, through
  # every entry point that takes a key.
  def entry_points(k):
    k1, k2, k3 = jax.random.split(k, 3)
    first = env.init(k1)
    state = env.reset(k2)
    action = testing.random_action(state, k3)
    out = dict(init=first, reset=state, step=env.step(state, action, k3))
    out["vmapped"] = jax.jit(jax.vmap(env.reset))(jax.random.split(k, 3))
    if not env.hidden_chance:
      out["sample_chance"] = env.sample_chance(first, k3)
      out["chance_outcome"] = envs.chance_outcome(first, k3)
    return out

  raw, typed = entry_points(jax.random.PRNGKey(11)), entry_points(jax.random.key(11))
  for a, b in zip(jax.tree.leaves(raw), jax.tree.leaves(typed), strict=True):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_raw_key_rejects_what_is_not_a_key():
  with pytest.raises(ValueError, match="expected a PRNG key .* dtype int32 and shape \\(3,\\)"):
    envs.raw_key(np.array([1, 2, 3], np.int32))
  with pytest.raises(ValueError, match="not supported; use the default threefry"):
    envs.raw_key(jax.random.key(0, impl="rbg"))
  np.testing.assert_array_equal(envs.raw_key(jax.random.key(5)), jax.random.PRNGKey(5))


OUR_GAMES = ("nannon", "catch", "carchess", "einstein", "breakthrough")


@pytest.mark.parametrize("name", OUR_GAMES)
@pytest.mark.parametrize("flavour", ["key", "PRNGKey"])
def test_a_batch_of_keys_or_actions_is_a_clear_error(name, flavour):
  # Env checks the shapes once for every game, at trace time (nothing runs):
  # a batch of keys or actions outside vmap is one line that says to vmap,
  # where it gave one game (nannon, catch, breakthrough) or a broadcasting
  # error that did not name the action. One key still plays one game.
  env = envs.make(name)
  keys = jax.random.split(getattr(jax.random, flavour)(0), 3)
  state = jax.eval_shape(env.init, getattr(jax.random, flavour)(0))
  assert state.current_player.shape == ()
  for entry in ("init", "reset"):
    with pytest.raises(ValueError) as e:
      jax.eval_shape(getattr(env, entry), keys)
    assert str(e.value) == (
      f"{name}: env.{entry} takes one PRNG key, got a batch of keys of shape (3,); "
      f"for a batch of games use jax.vmap(env.{entry})"
    )
  with pytest.raises(ValueError, match=r"env.step takes one PRNG key, .* jax.vmap\(env.step\)"):
    jax.eval_shape(env.step, state, 0, keys)
  with pytest.raises(ValueError) as e:
    jax.eval_shape(env.step, state, jax.numpy.zeros((3,), jax.numpy.int32))
  assert str(e.value) == (
    f"{name}: env.step takes one action, an integer of shape (), got an action of shape "
    "(3,); for a batch of games use jax.vmap(env.step)"
  )


def test_properties(env):
  assert env.payoff in envs.PAYOFF_KINDS
  assert env.id in envs.registered() or env.id.startswith(("pgx:", "gymnax:"))
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


def test_sample_chance_leaves_decision_states_alone(env, key):
  if env.hidden_chance:
    pytest.skip("chance is hidden: sample_chance raises (test_hidden_chance)")
  state = env.reset(key(6))
  again = env.sample_chance(state, key(7))
  for a, b in zip(
    jax.tree.leaves(state.replace(rewards=state.rewards * 0)), jax.tree.leaves(again)
  ):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_reset_draws_chance_from_chance_probs():
  # Nannon's opening node has outcomes of unequal probability; the keyed
  # sampler (inverse CDF, unrolled) must reproduce them.
  env = envs.make("nannon")
  init = env.init(jax.random.PRNGKey(0))
  probs = np.asarray(init.chance_probs, np.float64)
  n = 20000
  states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(1), n))
  d = env.game.d
  # Opening outcome d + (d-1)*starter + (m-1) leaves the starter to move m,
  # unless that roll has no legal move (never at the start).
  outcome = d + (d - 1) * np.asarray(states.game.mover) + np.asarray(states.game.die) - 1
  counts = np.bincount(outcome, minlength=probs.size)
  expected = n * probs
  assert np.all(counts[probs == 0] == 0)
  sigma = np.sqrt(expected * (1 - probs))
  assert np.all(np.abs(counts - expected)[probs > 0] < 5 * sigma[probs > 0])


@pytest.mark.parametrize(
  "name,params",
  [
    ("einstein", {"placement": "chance"}),  # runs of 3 chance nodes at reset
    ("nannon", {"points": 12, "checkers": 5}),  # long forfeit chains
  ],
)
def test_keyed_step_samples_chance_variants(name, params):
  # The keyed step unrolls a per-game bound of chance nodes; these variants
  # have the longest runs.
  testing.check_keyed_step(envs.make(name, **params), jax.random.PRNGKey(8))


def test_materialize_is_bit_exact():
  # The fusion boundary on per-game scalars must not change a bit.
  from envs.fusion import materialize

  tree = (
    np.array([1.5, -np.inf, np.nan, -0.0], np.float32),
    np.array([-7, 2**31 - 1, -(2**31)], np.int32),
    np.array([2**32 - 1, 0], np.uint32),
    np.array([-128, 127], np.int8),
    np.array([True, False]),
    np.int32(5),
  )
  out = jax.jit(jax.vmap(materialize))(jax.tree.map(lambda x: np.stack([x, x]), tree))
  for want, got in zip(tree, out):
    got = np.asarray(got)[1]
    assert got.dtype == want.dtype
    assert np.asarray(got).tobytes() == np.asarray(want).tobytes()


def test_a_game_with_more_chance_outcomes_than_it_declares_is_caught():
  """`check_playouts` holds a game to `max_chance_outcomes` after its first
  decision, and only there: Nannon's opening throw has 10 outcomes for a
  bound of 6; a Nannon that declares 5 is caught at its die rolls."""
  from envs.nannon import Nannon

  class Lying(Nannon):
    @property
    def max_chance_outcomes(self) -> int:
      return 5

  honest = envs.make("nannon")
  assert (honest.num_chance_outcomes, honest.max_chance_outcomes) == (16, 6)
  opening = np.asarray(honest.init(jax.random.PRNGKey(0)).chance_probs)
  assert (opening > 0).sum() == 10
  testing.check_playouts(honest, jax.random.PRNGKey(0))
  with pytest.raises(AssertionError, match=r"more outcomes than its max_chance_outcomes \(5\)"):
    testing.check_playouts(envs.Env(Lying(**honest.params)), jax.random.PRNGKey(0))
