"""The contract every registered game must satisfy, as reusable checks.

`tests/test_contract.py` runs `check_contract` over the whole registry, so a
new game is checked as soon as it is registered. Each check raises
AssertionError with a message naming the env.
"""

from __future__ import annotations

import functools
from typing import Dict

import jax
import jax.numpy as jnp
import numpy as np

from envs.core import CHANCE, TERMINAL, Env, State, chance_outcome, raw_key
from envs.policy import random_policy


def random_action(state: State, key: jax.Array) -> jax.Array:
  """int32 `[...]` (a state or a batch of them): a uniformly random legal
  action at a decision node (`random_policy`), a chance outcome at a chance
  node (`chance_outcome`), 0 when done."""
  k1, k2 = jax.random.split(key)
  return jnp.where(
    state.current_player == CHANCE, chance_outcome(state, k2), random_policy(state, k1)
  ).astype(jnp.int32)


def random_playout(env: Env, key: jax.Array, batch: int, num_steps: int) -> Dict[str, np.ndarray]:
  """Plays `batch` random games for `num_steps` explicit transitions (chance
  outcomes drawn by the caller, i.e. `env.step(state, action)`).

  Returns numpy arrays with a leading time axis `[num_steps + 1, batch, ...]`
  for current_player, legal_action_mask, chance_probs, rewards, terminated,
  truncated, step_count and illegal_action, plus `actions` `[num_steps, batch]`.
  """
  traj, actions = jax.device_get(_playout_program(env, batch, num_steps)(key))
  out = {k: np.asarray(v) for k, v in traj.items()}
  out["actions"] = np.asarray(actions)
  return out


@functools.lru_cache(maxsize=8)
def _playout_program(env: Env, batch: int, num_steps: int):
  """The jitted playout of `random_playout`, built once per (env object,
  batch, num_steps): a check that plays several keys (`check_playouts` per
  seed, `check_determinism` twice) traces and compiles it once, since
  tracing a game, not running it, is most of a check's time (an `Env`
  hashes by identity)."""

  def summary(s: State):
    return dict(
      current_player=s.current_player,
      legal_action_mask=s.legal_action_mask,
      chance_probs=s.chance_probs,
      rewards=s.rewards,
      terminated=s.terminated,
      truncated=s.truncated,
      step_count=s.step_count,
      illegal_action=s.illegal_action,
    )

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(k0, batch))

    def body(s, k):
      a = jax.vmap(random_action)(s, jax.random.split(k, batch))
      s2 = jax.vmap(env.step)(s, a)
      return s2, (summary(s2), a)

    _, (traj, actions) = jax.lax.scan(body, state, jax.random.split(k1, num_steps))
    first = summary(state)
    traj = jax.tree.map(lambda f, t: jnp.concatenate([f[None], t]), first, traj)
    return traj, actions

  return run


def check_shapes(env: Env, key: jax.Array) -> None:
  """init and step work under jit and vmap, with fixed shapes and dtypes."""
  name = env.id
  batch = 3
  states = jax.jit(jax.vmap(env.init))(jax.random.split(key, batch))
  expected = {
    "current_player": ((batch,), jnp.int32),
    "legal_action_mask": ((batch, env.num_actions), jnp.bool_),
    "chance_probs": ((batch, env.num_chance_outcomes), jnp.float32),
    "observation": ((batch,) + env.observation_shape, jnp.float32),
    "rewards": ((batch, env.num_players), jnp.float32),
    "terminated": ((batch,), jnp.bool_),
    "truncated": ((batch,), jnp.bool_),
    "step_count": ((batch,), jnp.int32),
    "illegal_action": ((batch,), jnp.bool_),
  }
  step = jax.jit(jax.vmap(env.step))
  keyed_step = jax.jit(jax.vmap(env.step))
  for s in (
    states,
    step(states, jax.vmap(random_action)(states, jax.random.split(key, batch))),
    keyed_step(
      states,
      jax.vmap(random_action)(states, jax.random.split(key, batch)),
      jax.random.split(key, batch),
    ),
  ):
    for field, (shape, dtype) in expected.items():
      value = getattr(s, field)
      assert value.shape == shape, f"{name}: {field} shape {value.shape} != {shape}"
      assert value.dtype == dtype, f"{name}: {field} dtype {value.dtype} != {dtype}"
  # The game pytree keeps its structure and shapes across a step.
  s1 = step(states, jax.vmap(random_action)(states, jax.random.split(key, batch)))
  assert jax.tree.structure(s1) == jax.tree.structure(states), f"{name}: pytree changed"
  for a, b in zip(jax.tree.leaves(s1), jax.tree.leaves(states)):
    assert a.shape == b.shape and a.dtype == b.dtype, f"{name}: leaf changed"
  assert env.num_chance_outcomes >= 1, f"{name}: num_chance_outcomes < 1"
  assert env.num_players >= 1 and env.num_actions >= 1


def check_playouts(env: Env, key: jax.Array, batch: int = 64) -> Dict[str, np.ndarray]:
  """Random playouts: masks, chance probabilities, rewards, termination."""
  name = env.id
  t = random_playout(env, key, batch, env.max_game_length + 2)
  player, mask, probs = t["current_player"], t["legal_action_mask"], t["chance_probs"]
  done = t["terminated"] | t["truncated"]
  decision = player >= 0
  chance = player == CHANCE
  assert np.all((player >= TERMINAL) & (player < env.num_players)), f"{name}: bad player id"
  assert np.all(mask[decision].any(-1)), f"{name}: empty legal mask at a decision node"
  assert np.all(mask.sum(-1) <= env.max_legal_actions), (
    f"{name}: more legal actions than its max_legal_actions ({env.max_legal_actions})"
  )
  assert not np.any(mask[~decision]), f"{name}: legal actions at a non-decision node"
  # Chance nodes after a lane's first decision (the step reached from one).
  decided = np.cumsum(decision, axis=0) - decision > 0
  support = (probs > 0).sum(-1)
  assert np.all(support[chance & decided] <= env.max_chance_outcomes), (
    f"{name}: a chance node after a decision has more outcomes than its "
    f"max_chance_outcomes ({env.max_chance_outcomes})"
  )
  assert 1 <= env.max_chance_outcomes <= env.num_chance_outcomes, name
  assert np.all(probs >= 0), f"{name}: negative chance probability"
  np.testing.assert_allclose(
    probs[chance].sum(-1), 1.0, atol=1e-5, err_msg=f"{name}: chance probs do not sum to 1"
  )
  assert not np.any(probs[~chance]), f"{name}: chance probs at a non-chance node"
  assert np.array_equal(done, player == TERMINAL), f"{name}: TERMINAL != done"
  assert not np.any(t["illegal_action"]), f"{name}: random legal play was flagged illegal"
  # Every game ends within max_game_length transitions.
  assert np.all(done[env.max_game_length]), f"{name}: game longer than max_game_length"
  # Absorbing: once done, nothing changes and rewards are zero.
  for k in range(1, done.shape[0]):
    was = done[k - 1]
    assert np.all(t["rewards"][k][was] == 0), f"{name}: reward after the end"
    assert np.all(t["step_count"][k][was] == t["step_count"][k - 1][was]), (
      f"{name}: step_count moved after the end"
    )
  rewards = t["rewards"]
  if env.payoff == "zero_sum":
    np.testing.assert_allclose(
      rewards.sum(-1), 0.0, atol=1e-5, err_msg=f"{name}: zero-sum rewards do not sum to 0"
    )
  if env.payoff == "collaborative":
    assert np.all(rewards == rewards[..., :1]), f"{name}: collaborative rewards differ"
  return t


def check_determinism(env: Env, key: jax.Array) -> None:
  """The same key gives the same trajectory: the compiled playout run twice
  on one key (`random_playout` reuses its program)."""
  a = random_playout(env, key, 4, min(env.max_game_length, 64))
  b = random_playout(env, key, 4, min(env.max_game_length, 64))
  for k in a:
    assert np.array_equal(a[k], b[k]), f"{env.id}: {k} differs for the same key"


def check_keyed_step(env: Env, key: jax.Array, batch: int = 16) -> None:
  """`reset` and `step(state, action, key)` never stop at a chance node."""

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.reset)(jax.random.split(k0, batch))

    def body(s, k):
      ka, kc = jax.random.split(k)
      a = jax.vmap(random_action)(s, jax.random.split(ka, batch))
      s = jax.vmap(env.step)(s, a, jax.random.split(kc, batch))
      return s, s.current_player

    s0 = s.current_player
    _, players = jax.lax.scan(body, s, jax.random.split(k1, env.max_game_length))
    return s0, players

  s0, players = jax.device_get(run(key))
  assert not np.any(s0 == CHANCE), f"{env.id}: reset stopped at a chance node"
  assert not np.any(players == CHANCE), f"{env.id}: keyed step stopped at chance"


def check_absorbing_and_illegal(env: Env, key: jax.Array) -> None:
  """An illegal action ends the game with the documented penalty."""
  s = env.reset(key)
  if int(s.current_player) < 0:
    return
  illegal = [i for i, m in enumerate(np.asarray(s.legal_action_mask)) if not m]
  for a in illegal[:1] + [env.num_actions]:
    s2 = jax.jit(env.step)(s, jnp.int32(a))
    assert bool(s2.terminated) and bool(s2.illegal_action), f"{env.id}: illegal {a} not flagged"
    mover = int(s.current_player)
    assert float(s2.rewards[mover]) == -1.0, f"{env.id}: illegal mover reward"
    s3 = jax.jit(env.step)(s2, jnp.int32(0))
    assert not np.any(np.asarray(s3.rewards)), f"{env.id}: reward after the end"
    try:
      env.check_action(s, a)
    except ValueError as e:
      assert "legal" in str(e)
    else:
      raise AssertionError(f"{env.id}: check_action accepted illegal {a}")


def check_done_states_absorb(env: Env, key: jax.Array, batch: int = 32) -> None:
  """A finished game (terminated, truncated or ended by an illegal action)
  steps to itself, every field equal but `rewards`, which are zero: with an
  explicit and with a keyed step. Random play, with an illegal action now
  and then so that every env has games that end that way."""
  explicit = not env.hidden_chance
  num_steps = min(env.max_game_length + 2, 96)

  def kept(old: State, new: State) -> jax.Array:
    same = [
      jnp.all((o == n).reshape(o.shape[0], -1), axis=-1)
      for o, n in zip(jax.tree.leaves(old.replace(rewards=new.rewards)), jax.tree.leaves(new))
    ]
    return jnp.all(jnp.stack(same), axis=0) & jnp.all(new.rewards == 0, axis=-1)

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.reset)(jax.random.split(k0, batch))

    def body(s, k):
      ka, ki, kc = jax.random.split(k, 3)
      a = jax.vmap(random_action)(s, jax.random.split(ka, batch))
      rare = jax.random.uniform(ki, (batch,)) < 1 / 16
      a = jnp.where(rare & (s.current_player >= 0), env.num_actions, a)
      keyed = jax.vmap(env.step)(s, a, jax.random.split(kc, batch))
      ok = kept(s, keyed)
      if explicit:
        ok &= kept(s, jax.vmap(env.step)(s, a))
      return keyed, (s.done, ok | ~s.done)

    _, (done, ok) = jax.lax.scan(body, s, jax.random.split(k1, num_steps))
    return done, ok

  done, ok = jax.device_get(run(key))
  assert done.any(), f"{env.id}: no game ended in {num_steps} random steps"
  assert ok.all(), f"{env.id}: a finished game changed when stepped"


def check_hidden_chance(env: Env, key: jax.Array) -> None:
  """Where chance hides inside the keyed transition (`env.hidden_chance`,
  the gymnax and pgx adapters): no chance nodes; `step(state, action, key)`
  is the explicit step with the state's carried key replaced by `key`; the
  explicit-chance entry points raise a clear error. Other envs: nothing."""
  if not env.hidden_chance:
    return
  name = env.id
  assert env.num_chance_outcomes == 1, f"{name}: hidden chance with chance outcomes"
  s = env.reset(key)
  assert int(s.current_player) != CHANCE, f"{name}: a chance node"
  k = jax.random.fold_in(key, 1)
  a = random_action(s, key)
  keyed = jax.jit(env.step)(s, a, k)
  # The state carries raw keys (`raw_key`), whatever flavour came in.
  explicit = jax.jit(env.step)(s.replace(game=s.game.replace(key=raw_key(k))), a)
  for x, y in zip(jax.tree.leaves(keyed), jax.tree.leaves(explicit)):
    assert np.array_equal(np.asarray(x), np.asarray(y)), f"{name}: keyed step ignores its key"
  for call in (lambda: env.sample_chance(s, key), lambda: env.game.apply_chance(s.game, 0)):
    try:
      call()
    except ValueError as e:
      assert "hidden" in str(e) and "step(state, action, key)" in str(e), str(e)
    else:
      raise AssertionError(f"{name}: an explicit-chance entry point did not raise")


def check_contract(env: Env, key: jax.Array) -> None:
  """All contract checks for one env."""
  ks = jax.random.split(key, 7)
  check_shapes(env, ks[0])
  check_playouts(env, ks[1])
  check_determinism(env, ks[2])
  check_keyed_step(env, ks[3])
  check_absorbing_and_illegal(env, ks[4])
  check_hidden_chance(env, ks[5])
  check_done_states_absorb(env, ks[6])
  assert isinstance(env.render(env.init(ks[0])), str)
