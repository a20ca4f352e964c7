"""Carchess: each rule on a hand-built board, a differential test of the
simulation against a plain-Python transcription of RULES.md on random boards,
the chance nodes and turn order, and invariants over random play."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny as tiny_lib

import envs
import envs.bots
from envs import carchess_maps
from envs.bots import carchess as carchess_bots
from envs.core import CHANCE, TERMINAL
from envs.testing import random_action
from anakin_mz.cli import main as cli_main
from anakin_mz.eval import match
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.runtime import export
from anakin_mz.core import registry as runtime_registry
from anakin_mz.runtime import restore

# Tutorial map facts (RULES.md): lanes 0 west on row 4, 1 north on col 5,
# 2 east on row 5, 3 south on col 4; each lane's light is at position 3;
# light index k sits on lane LIGHT_LANE[k].
LIGHT_LANE = (3, 0, 2, 1)
LANE_LIGHT = {lane: k for k, lane in enumerate(LIGHT_LANE)}

# Test maps, as JSON specs (maps are data).
MERGE = {  # lane 1 comes up col 2 and joins lane 0 (both then head east).
  "name": "merge",
  "height": 3,
  "width": 6,
  "lanes": [{"start": [0, 0], "path": "EEEEE"}, {"start": [2, 2], "path": "NNEEE"}],
  "lights": [[0, 2], [2, 2]],
}
TRIPLE = {  # three lanes meet at (2, 2) from the west, the north and the east.
  "name": "triple",
  "height": 5,
  "width": 5,
  "lanes": [
    {"start": [2, 0], "path": "EEEE"},
    {"start": [0, 2], "path": "SSSS"},
    {"start": [2, 4], "path": "WWWW"},
  ],
  "lights": [[2, 1], [1, 2]],
}
LIGHT_ON_CROSSING = {  # the light stands on the crossing cell (1, 2).
  "name": "light_on_crossing",
  "height": 4,
  "width": 5,
  "lanes": [{"start": [1, 0], "path": "EEEE"}, {"start": [0, 2], "path": "SSS"}],
  "lights": [[1, 2], [0, 2]],
}


@pytest.fixture(scope="module")
def env():
  return envs.make("carchess")


def map_env(tmp_path, spec, **params):
  path = tmp_path / f"{spec['name']}.json"
  path.write_text(json.dumps(spec))
  return envs.make("carchess", map=str(path), **params)


def board(env, cars=(), red=None, counters=None, turn=0, toggled=None):
  """A decision-node state of `env`'s game: `cars` are (lane, position)."""
  game = env.game
  g = game.init(jax.random.PRNGKey(0))
  occ = np.zeros(g.cars.shape, bool)
  for lane, pos in cars:
    occ[lane, pos] = True
  red = np.zeros(game.num_lights, bool) if red is None else np.asarray(red, bool)
  counters = np.zeros(game.num_lanes, np.int32) if counters is None else counters
  toggled = np.zeros(game.num_lights, bool) if toggled is None else np.asarray(toggled, bool)
  return g.replace(
    cars=jnp.asarray(occ),
    red=jnp.asarray(red),
    toggled=jnp.asarray(toggled),
    counters=jnp.asarray(counters, jnp.int32),
    chance_lane=jnp.int32(game.num_lanes),
    turn=jnp.int32(turn),
  )


def cars_of(g):
  return {(int(l), int(i)) for l, i in zip(*np.nonzero(np.asarray(g.cars)))}


_JITTED = {}


def jitted(env, what):
  """One jitted function per (env, what), shared by the tests."""
  key = (id(env), what)
  if key not in _JITTED:
    fn = {
      "step": lambda: jax.jit(env.step),
      "sim_step": lambda: jax.jit(env.game.simulation_step),
      "simulate": lambda: jax.jit(env.game.simulate, static_argnums=1),
      "chance_probs": lambda: jax.jit(env.game.chance_probs),
    }[what]()
    _JITTED[key] = (env, fn)  # keeps env alive so its id is not reused
  return _JITTED[key][1]


def step(env, g):
  g2, scored, crashes = jitted(env, "sim_step")(g)
  return g2, int(scored), int(crashes)


def red_lights(*lanes):
  red = np.zeros(4, bool)
  for lane in lanes:
    red[LANE_LIGHT[lane]] = True
  return red


# The rules, each on a hand-built board.


def test_red_light_holds_a_car(env):
  g = board(env, cars=[(0, 3), (2, 2)], red=red_lights(0, 2))
  g2, _, _ = step(env, g)
  # The car on its red light stays; the one behind a red light drives onto it.
  assert cars_of(g2) == {(0, 3), (2, 3)}
  g3, _, _ = step(env, board(env, cars=[(0, 3)], red=red_lights(2)))
  assert cars_of(g3) == {(0, 4)}


def test_queue_moves_only_when_its_head_moves(env):
  queue = [(1, 0), (1, 1), (1, 2), (1, 3)]
  held, _, _ = step(env, board(env, cars=queue, red=red_lights(1)))
  assert cars_of(held) == set(queue)
  moved, _, _ = step(env, board(env, cars=queue, red=red_lights()))
  assert cars_of(moved) == {(1, 1), (1, 2), (1, 3), (1, 4)}
  # A gap lets the tail close up while the head waits.
  gap, _, _ = step(env, board(env, cars=[(1, 0), (1, 3)], red=red_lights(1)))
  assert cars_of(gap) == {(1, 1), (1, 3)}


def test_same_direction_car_of_another_lane_blocks(tmp_path):
  merge = map_env(tmp_path, MERGE)
  # Lane 0's car waits on the red light at (0, 2); lane 1's car at (1, 2)
  # heads east at (0, 2) too, so it waits behind it instead of crashing.
  g2, _, crashes = step(merge, board(merge, cars=[(0, 2), (1, 1)], red=[True, False]))
  assert cars_of(g2) == {(0, 2), (1, 1)} and crashes == 0
  g3, _, _ = step(merge, board(merge, cars=[(0, 2), (1, 1)], red=[False, False]))
  assert cars_of(g3) == {(0, 3), (1, 2)}


def test_crossing_cars_crash(env):
  # Lane 3's car leaves its green light for (4, 4) while lane 0's car drives
  # from (4, 5) to (4, 4): two cars on one cell, crash count 1.
  g = board(env, cars=[(3, 3), (0, 4), (2, 0)], red=red_lights())
  g2, scored, crashes = step(env, g)
  assert crashes == 1 and scored == 0
  assert cars_of(g2) == {(2, 1)}
  assert int(g2.crashed) == 2 and int(g2.crashes) == 1
  _, reward = jitted(env, "simulate")(g, 1)
  assert float(reward) == -1.0


def test_crossing_car_moves_into_a_standing_car(tmp_path):
  m = map_env(tmp_path, LIGHT_ON_CROSSING)
  # Lane 0's car stands on the red light at the crossing; lane 1's car comes
  # from the north (a crossing lane) and drives into it anyway.
  g2, _, crashes = step(m, board(m, cars=[(0, 2), (1, 0)], red=[True, False]))
  assert crashes == 1 and cars_of(g2) == set()


def test_three_cars_on_one_cell_count_two(tmp_path):
  m = map_env(tmp_path, TRIPLE)
  g = board(m, cars=[(0, 1), (1, 1), (2, 1)], red=[False, False])
  g2, _, crashes = step(m, g)
  assert crashes == 2 and int(g2.crashed) == 3 and cars_of(g2) == set()
  _, reward = jitted(m, "simulate")(g, 1)
  assert float(reward) == -2.0


def test_reaching_the_end_scores_two(env):
  g = board(env, cars=[(0, 8), (2, 7)])
  g2, scored, crashes = step(env, g)
  assert (scored, crashes) == (1, 0) and cars_of(g2) == {(2, 8)}
  _, reward = jitted(env, "simulate")(g, 2)
  assert float(reward) == 4.0  # both cars reach the end within two steps


def test_spawning_needs_a_free_entry_cell(env):
  queue = [(0, 0), (0, 1), (0, 2), (0, 3)]
  counters = [2, 1, 0, 0]
  g2, _, _ = step(env, board(env, cars=queue, red=red_lights(0), counters=counters))
  # Lane 0's entry stays occupied: no spawn, its counter keeps 2; lane 1 spawns.
  assert cars_of(g2) == set(queue) | {(1, 0)}
  assert np.asarray(g2.counters).tolist() == [2, 0, 0, 0]
  assert int(g2.spawned) == 1
  # A car leaving the entry frees it in the same step.
  g3, _, _ = step(env, board(env, cars=[(0, 0)], counters=counters))
  assert cars_of(g3) == {(0, 0), (0, 1), (1, 0)}
  assert np.asarray(g3.counters).tolist() == [1, 0, 0, 0]


def test_spawn_counter_cap_and_clipped_chance(env):
  game = env.game
  assert game.capacities.tolist() == [4, 4, 4, 4]  # floor((10 - 2) * 0.5)
  assert env.num_chance_outcomes == 5
  g = board(env, counters=[0, 2, 4, 3]).replace(chance_lane=jnp.int32(0))
  probs = jitted(env, "chance_probs")
  expected = ([0.2] * 5, [0.2, 0.2, 0.6, 0, 0], [1, 0, 0, 0, 0], [0.2, 0.8, 0, 0, 0])
  for lane, want in enumerate(expected):
    got = probs(g.replace(chance_lane=jnp.int32(lane)))
    np.testing.assert_allclose(got, want, atol=1e-6)
  # Through Env: an increment above the capacity left is impossible.
  state = env.init(jax.random.PRNGKey(0)).replace(game=g.replace(chance_lane=jnp.int32(1)))
  state = state.replace(chance_probs=probs(state.game))
  with pytest.raises(ValueError, match="impossible"):
    env.check_action(state, 3)
  s2 = jitted(env, "step")(state, jnp.int32(3))
  assert bool(s2.illegal_action)
  s3 = jitted(env, "step")(state, jnp.int32(2))
  assert not bool(s3.illegal_action)
  assert np.asarray(s3.game.counters).tolist() == [0, 4, 4, 3]


def test_clipped_distribution_with_spawn_min(tmp_path):
  env = envs.make("carchess", spawn_min=2, spawn_max=3)
  g = board(env, counters=[3, 1, 0, 4]).replace(chance_lane=jnp.int32(0))
  probs = jitted(env, "chance_probs")
  want = ([0, 1, 0, 0], [0, 0, 0.5, 0.5], [0, 0, 0.5, 0.5], [1, 0, 0, 0])
  for lane, w in enumerate(want):
    np.testing.assert_allclose(probs(g.replace(chance_lane=jnp.int32(lane))), w)


# Round structure and turn order.


def test_turn_order_and_rewards(env):
  state = env.init(jax.random.PRNGKey(1))
  step_fn = jitted(env, "step")
  simulate = lambda g: jitted(env, "simulate")(g, 5)[1]
  rounds, n, lanes = 10, 2, 4
  expected = [CHANCE] * lanes
  for r in range(rounds):
    expected += [0, 1] + ([CHANCE] * lanes if r < rounds - 1 else [])
  expected.append(TERMINAL)
  seen, key, chance_run, first = [], jax.random.PRNGKey(2), 0, None
  while int(state.current_player) != TERMINAL:
    p = int(state.current_player)
    seen.append(p)
    if p == CHANCE:
      assert int(state.game.chance_lane) == chance_run  # lanes in order
      chance_run += 1
      key, sub = jax.random.split(key)
      action = int(random_action(state, sub))
    else:
      chance_run = 0
      assert int(state.game.turn) == p
      key, sub = jax.random.split(key)
      action = int(random_action(state, sub))
      if p == 1:
        assert not bool(state.legal_action_mask[first])  # player 0's light
        # The round's reward: both toggles, then sim_steps steps.
        want = float(
          simulate(
            state.game.replace(red=state.game.red ^ (jnp.asarray(env.game._light_cells) == action))
          )
        )
      first = action
    state = step_fn(state, jnp.int32(action))
    rewards = np.asarray(state.rewards)
    if p == 1:
      assert np.all(rewards == want)
      assert int(state.game.round) == seen.count(1)
    else:
      assert not np.any(rewards)
  seen.append(TERMINAL)
  assert seen == expected
  assert env.max_game_length == len(expected) - 1 == rounds * (n + lanes)


def test_chance_nodes_update_lanes_in_order(env):
  state = env.init(jax.random.PRNGKey(0))
  step_fn = jitted(env, "step")
  for lane, inc in enumerate([3, 0, 4, 1]):
    assert int(state.current_player) == CHANCE
    assert int(state.game.chance_lane) == lane
    state = step_fn(state, jnp.int32(inc))
  assert np.asarray(state.game.counters).tolist() == [3, 0, 4, 1]
  assert int(state.current_player) == 0


def test_legal_actions_are_the_untoggled_lights(env):
  state = env.reset(jax.random.PRNGKey(0))
  light_cells = sorted(r * 10 + c for r, c in env.game.map.lights)
  assert np.flatnonzero(state.legal_action_mask).tolist() == light_cells == [34, 46, 53, 65]
  red0 = np.asarray(state.game.red)
  s1 = jitted(env, "step")(state, jnp.int32(46))
  assert int(s1.current_player) == 1
  assert np.flatnonzero(s1.legal_action_mask).tolist() == [34, 53, 65]
  assert np.asarray(s1.game.red).tolist() == [red0[0], not red0[1], red0[2], red0[3]]
  with pytest.raises(ValueError, match="illegal"):
    env.check_action(s1, 46)
  with pytest.raises(ValueError, match="illegal"):
    env.check_action(s1, 0)  # not a light


def test_start_state(env):
  states = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(0), 400))
  assert not np.any(np.asarray(states.game.cars))
  assert not np.any(np.asarray(states.game.counters))
  assert np.all(np.asarray(states.current_player) == CHANCE)
  frac = np.asarray(states.game.red).mean()
  assert 0.4 < frac < 0.6  # independent lights, red with probability 1/2


# Observation and render.


def test_observation_planes(env):
  # 23 channels since version 2 (22 before): the thesis' 4 lane, 1 light and
  # 5 counter planes, then the toggled plane (channel 10, new), then the
  # mover's 2 and the round's 10 constant planes, each one channel later.
  g = board(
    env,
    cars=[(0, 2), (3, 4)],
    red=[True, False, False, True],
    counters=[0, 4, 2, 2],
    turn=1,
    toggled=[False, True, False, False],  # player 0 toggled the light at (4, 6)
  ).replace(round=jnp.int32(3))
  obs = np.asarray(jax.jit(env.game.observe)(g, jnp.int32(1)))
  assert obs.shape == env.observation_shape == (10, 10, 23) and obs.dtype == np.float32
  lanes, light, counts, toggled = obs[..., :4], obs[..., 4], obs[..., 5:10], obs[..., 10]
  assert lanes.sum() == 2 and lanes[4, 7, 0] == 1 and lanes[4, 4, 3] == 1
  assert light[3, 4] == -1 and light[4, 6] == 1 and light[5, 3] == 1 and light[6, 5] == -1
  assert np.count_nonzero(light) == 4
  assert counts.sum() == 4
  assert counts[4, 9, 0] == 1 and counts[9, 5, 4] == 1
  assert counts[5, 0, 2] == 1 and counts[0, 4, 2] == 1
  assert np.flatnonzero(toggled).tolist() == [46] and toggled[4, 6] == 1
  assert np.all(obs[..., 11:13] == [0, 1])  # player 1 to move
  assert np.all(obs[..., 13:] == np.eye(10)[3])  # round 3
  # Two toggled lights (a 3-player round's third mover): two 1s, the rest 0.
  g3 = g.replace(toggled=jnp.asarray([True, False, False, True]))
  toggled3 = np.asarray(jax.jit(env.game.observe)(g3, jnp.int32(1)))[..., 10]
  assert np.flatnonzero(toggled3).tolist() == [34, 65]
  # At a round's first move nothing is toggled.
  g0 = g.replace(toggled=jnp.zeros(4, bool), turn=jnp.int32(0))
  assert not np.any(np.asarray(jax.jit(env.game.observe)(g0, jnp.int32(0)))[..., 10])


SHARED_ENTRY = {  # lanes 0 and 1 enter at (1, 0); lane 2 is 41 cells long.
  "name": "shared_entry",
  "height": 3,
  "width": 41,
  "lanes": [
    {"start": [1, 0], "path": "EEEE"},
    {"start": [1, 0], "path": "NEEE"},
    {"start": [2, 0], "path": "E" * 40},
  ],
  "lights": [[1, 1], [0, 1]] + [[2, c] for c in range(3, 38)],  # 37 lights
}


def reference_observation(game, cars, red, counters, rounds_done, player, toggled):
  """The observation as the module doc defines it, plane by plane, in numpy
  from the map alone (the representation the planes had before they were
  built from bit codes)."""
  m, p = game.map, game.params
  L, cap, n = m.num_lanes, int(game.capacities.max()), game.num_players
  T = L + 1 + cap + 1  # the toggled plane
  obs = np.zeros((m.height, m.width, T + 1 + n + p["rounds"]), np.float32)
  for l, lane in enumerate(m.lanes):
    for i, (r, c) in enumerate(lane[:-1]):
      obs[r, c, l] += cars[l, i]
    r, c = lane[0]
    obs[r, c, L + 1 + counters[l]] += 1.0
  for k, (r, c) in enumerate(m.lights):
    obs[r, c, L] = -1.0 if red[k] else 1.0
    obs[r, c, T] = 1.0 if toggled[k] else 0.0
  obs[:, :, T + 1 + player] = 1.0
  if rounds_done < p["rounds"]:
    obs[:, :, T + 1 + n + rounds_done] = 1.0
  return obs


# SHARED_ENTRY with 20 lights, the red and toggled lights in a word each
# (17-32 lights: the tutorial's 4 share one word, 37 use none), and lane 2
# 61 cells long: its counter runs to 29, so the toggled plane (channel 34)
# lies in another code word than the light plane (channel 3).
SHARED_ENTRY_20 = dict(
  SHARED_ENTRY,
  name="shared_entry_20",
  width=61,
  lanes=SHARED_ENTRY["lanes"][:2] + [{"start": [2, 0], "path": "E" * 60}],
  lights=SHARED_ENTRY["lights"][:20],
)


@pytest.mark.parametrize(
  "spec,params",
  [
    (None, {}),
    (SHARED_ENTRY, dict(players=3, rounds=40)),
    (SHARED_ENTRY_20, dict(players=3, rounds=40)),
  ],
  ids=["tutorial", "shared_entry_40_rounds", "shared_entry_20_lights"],
)
def test_observation_matches_reference_on_random_states(spec, params, tmp_path):
  # Thousands of random boards, rounds (the game-over one included),
  # movers and toggled lights. The second map has two lanes entering at one
  # cell (a counter plane can hold 2), a lane longer than 32 cells (the dense
  # simulation), more than 32 lights and more than 31 channels (several code
  # words per cell); the third has 20 lights and its toggled plane in the
  # second code word.
  env = envs.make("carchess") if spec is None else map_env(tmp_path, spec, **params)
  game = env.game
  rng = np.random.default_rng(3)
  num = 2000
  boards = random_boards(game, rng, num)
  cars = np.stack([b[0] for b in boards])
  red = np.stack([b[1] for b in boards])
  counters = np.stack([b[2] for b in boards]).astype(np.int32)
  if spec is not None:
    counters[: num // 2, 1] = counters[: num // 2, 0]  # equal counters on the shared entry
  rounds_done = rng.integers(0, game.params["rounds"] + 1, num).astype(np.int32)
  player = rng.integers(0, game.num_players, num).astype(np.int32)
  toggled = rng.random((num, game.num_lights)) < 0.5
  g0 = game.init(jax.random.PRNGKey(0))
  batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (num,) + x.shape), g0).replace(
    cars=jnp.asarray(cars),
    red=jnp.asarray(red),
    counters=jnp.asarray(counters),
    round=jnp.asarray(rounds_done),
    toggled=jnp.asarray(toggled),
  )
  obs = np.asarray(jax.jit(jax.vmap(game.observe))(batch, jnp.asarray(player)))
  mask = np.asarray(jax.jit(jax.vmap(game.legal_action_mask))(batch))
  light_cells = [r * game.map.width + c for r, c in game.map.lights]
  want_mask = np.zeros((num, env.num_actions), bool)
  want_mask[:, light_cells] = ~toggled
  np.testing.assert_array_equal(mask, want_mask)
  assert obs.shape == (num,) + env.observation_shape and obs.dtype == np.float32
  for k in range(num):
    want = reference_observation(
      game, cars[k], red[k], counters[k], rounds_done[k], player[k], toggled[k]
    )
    np.testing.assert_array_equal(obs[k], want, err_msg=f"state {k}")
  if spec is not None:
    assert obs.max() == 2.0  # two lanes with one counter value on one entry cell


def test_the_toggled_plane_tells_apart_states_that_play_out_differently(env):
  # Two rounds reached by play from boards that differ only in two lights:
  # player 0 toggles the light at (4, 6) in one, the one at (5, 3) in the
  # other, so cars, lights, counters, round and mover are then the same,
  # and only which light was toggled differs. That decides player 1's
  # moves, hence the lights the round's simulation runs on.
  game = env.game
  apply, legal = jax.jit(game.apply_action), jax.jit(game.legal_action_mask)
  observe = jax.jit(game.observe)
  common = dict(cars=[(0, 2), (1, 5), (3, 1)], counters=[1, 0, 3, 2])
  start_a = board(env, red=[True, False, False, True], **common).replace(round=jnp.int32(2))
  start_b = board(env, red=[True, True, True, True], **common).replace(round=jnp.int32(2))
  a, _ = apply(start_a, jnp.int32(46))
  b, _ = apply(start_b, jnp.int32(53))
  for field in ("cars", "red", "counters", "round", "turn", "chance_lane"):
    np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
  assert int(game.current_player(a)) == int(game.current_player(b)) == 1
  legal_a = np.flatnonzero(legal(a)).tolist()
  legal_b = np.flatnonzero(legal(b)).tolist()
  assert legal_a == [34, 53, 65] and legal_b == [34, 46, 65]

  # The lights each can end the round with differ, and so do its rewards.
  def outcomes(g, moves):
    ends = {}
    for m in moves:
      end, reward = apply(g, jnp.int32(m))
      ends[tuple(np.asarray(end.red).tolist())] = float(reward[0])
    return ends

  ends_a, ends_b = outcomes(a, legal_a), outcomes(b, legal_b)
  assert set(ends_a) != set(ends_b)
  obs_a, obs_b = np.asarray(observe(a, jnp.int32(1))), np.asarray(observe(b, jnp.int32(1)))
  differ = np.flatnonzero(np.any(obs_a != obs_b, axis=(0, 1))).tolist()
  assert differ == [10]  # the toggled plane alone; version 1 observed them the same
  assert np.flatnonzero(obs_a[..., 10]).tolist() == [46]
  assert np.flatnonzero(obs_b[..., 10]).tolist() == [53]


def test_the_observation_determines_the_state_that_matters(env):
  # Over random play, decision and terminal nodes with one observation have
  # one state, as far as it decides the rest of the game: cars, lights,
  # toggled lights, spawn counters, round and mover (and so the legal
  # moves). Without the toggled plane (version 1's observation), some do not.
  batch, steps = 512, env.num_players * env.game.params["rounds"] + 1

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.reset)(jax.random.split(k0, batch))

    def body(s, k):
      ka, ks = jax.random.split(k)
      a = jax.vmap(random_action)(s, jax.random.split(ka, batch))
      g = s.game
      seen = (
        s.observation.astype(jnp.int8),
        s.legal_action_mask,
        (g.cars, g.red, g.toggled, g.counters, g.round, g.turn, s.current_player),
      )
      return jax.vmap(env.step)(s, a, jax.random.split(ks, batch)), seen

    return jax.lax.scan(body, s, jax.random.split(k1, steps))[1]

  obs, mask, fields = jax.device_get(run(jax.random.PRNGKey(11)))
  assert not np.any(np.asarray(fields[-1]) == CHANCE)  # keyed steps: no chance nodes
  obs = obs.reshape((-1,) + env.observation_shape)
  mask = mask.reshape(obs.shape[0], -1)
  fields = [np.asarray(f).reshape(obs.shape[0], -1) for f in fields]
  state = np.concatenate([f.astype(np.int32) for f in fields], axis=1)

  def clashes(planes):
    """(repeats, clashes): the states whose planes an earlier state has,
    and those of them whose state differs from that earlier one's."""
    first, repeats, bad = {}, [], []
    for k in range(obs.shape[0]):
      j = first.setdefault(planes[k].tobytes(), k)
      if j != k:
        repeats.append(k)
        if not np.array_equal(state[j], state[k]):
          bad.append((j, k))
    return repeats, bad

  repeats, bad = clashes(obs)
  assert len(repeats) > 10 and not bad  # observations repeat; none stands for two states
  _, bad_old = clashes(np.delete(obs, 10, axis=-1))  # the planes of version 1
  assert any(not np.array_equal(mask[j], mask[k]) for j, k in bad_old)


def test_a_model_of_the_old_observation_is_refused_in_one_line(tmp_path, capsys):
  # Version 2 changed the observation (the toggled plane): a model file or
  # checkpoint of version 1 is refused by name, never read with its input
  # layer fed the new planes.
  assert envs.make("carchess").version == 2
  config = tiny_lib.tiny_config("carchess")
  env = config.make_env()
  network = runtime_registry.get(config.agent).model(config, env)
  params = network.init(jax.random.PRNGKey(0))
  old = str(tmp_path / "carchess_v1.msgpack")
  export.write(old, config, params, 1, "carchess", 1)
  with pytest.raises(ckpt.CheckpointError) as e:
    restore.load_agent(old, expect_env="carchess")
  assert str(e.value) == (
    f"checkpoint {old!r} is for carchess version 1; this code has version 2 (the "
    "game's rules or observation changed: retrain, or use the code it was trained with)"
  )
  # A checkpoint directory goes through the same check.
  meta = ckpt.make_metadata(config.to_dict(), "carchess", 1, 1)
  with pytest.raises(ckpt.CheckpointError, match="is for carchess version 1; this code has"):
    ckpt.check_compatible(meta, "c", env_id="carchess", env_version=env.version)
  # The command line: exit status 2 and that one line, no traceback.
  capsys.readouterr()
  assert cli_main(["evaluate", "--checkpoint", old, "--games", "2"]) == 2
  out = capsys.readouterr()
  assert out.err.splitlines() == [f"error: {e.value}"] and not out.out


def test_render_shows_lanes_cars_lights_counters(env):
  g = board(env, cars=[(0, 2), (1, 4)], red=[True, False, False, False], counters=[3, 0, 1, 4])
  text = env.game.render(jax.device_get(g))
  rows = text.splitlines()
  assert rows[5] == " <<<<++GA<<3"  # lane 0: green light, a car, counter 3
  assert rows[6] == "1>>>G+B>>>>"  # lane 2's counter, lane 1's car on a crossing
  assert rows[4][5] == "R" and rows[11][6] == "0"
  assert rows[1][5] == "v" and rows[6][0] == "1" and rows[0][5] == "4"
  assert "spawn counter 3/4" in text and "[3, 4] red" in text


# Differential: the vectorised step against a plain transcription of RULES.md.


def reference_step(m, cars, red, counters):
  """RULES.md, literally: returns (cars, counters, scored, crash count)."""
  heading = {}
  for l, lane in enumerate(m.lanes):
    for i, cell in enumerate(lane):
      a, b = (lane[i], lane[i + 1]) if i + 1 < len(lane) else (lane[i - 1], lane[i])
      heading[l, i] = (b[0] - a[0], b[1] - a[1])
  at = {m.lanes[l][i]: (l, i) for l, i in cars}
  red_cells = {cell for k, cell in enumerate(m.lights) if red[k]}
  memo = {}

  def can_move(car, chain):
    if car not in memo:
      l, i = car
      if m.lanes[l][i] in red_cells:
        memo[car] = False
      else:
        other = at.get(m.lanes[l][i + 1])
        if other is not None and (other[0] == l or heading[other] == heading[l, i + 1]):
          memo[car] = True if other in chain else can_move(other, chain | {car})
        else:
          memo[car] = True
    return memo[car]

  moved, scored = [], 0
  for l, i in cars:
    if can_move((l, i), frozenset()):
      if i + 1 == len(m.lanes[l]) - 1:
        scored += 1
      else:
        moved.append((l, i + 1))
    else:
      moved.append((l, i))
  counters = list(counters)
  cells = [m.lanes[l][i] for l, i in moved]
  for l, lane in enumerate(m.lanes):
    if counters[l] > 0 and lane[0] not in cells:
      moved.append((l, 0))
      counters[l] -= 1
  cells = [m.lanes[l][i] for l, i in moved]
  crash = 0
  for cell in set(cells):
    if cells.count(cell) >= 2:
      crash += cells.count(cell) - 1
  left = {car for car in moved if cells.count(m.lanes[car[0]][car[1]]) == 1}
  return left, counters, scored, crash


def random_boards(game, rng, num):
  m = game.map
  L, A = len(m.lanes), m.max_lane_length
  boards = []
  for _ in range(num):
    occ, used = np.zeros((L, A), bool), set()
    density = rng.uniform(0.1, 0.9)
    for l in rng.permutation(L):
      for i in range(len(m.lanes[l]) - 1):
        if rng.random() < density and m.lanes[l][i] not in used:
          occ[l, i] = True
          used.add(m.lanes[l][i])
    red = rng.random(len(m.lights)) < 0.5
    counters = rng.integers(0, game.capacities + 1)
    boards.append((occ, red, counters))
  return boards


@pytest.mark.parametrize(
  "spec",
  [None, MERGE, TRIPLE, LIGHT_ON_CROSSING],
  ids=["tutorial", "merge", "triple", "light_on_crossing"],
)
def test_step_matches_reference_on_random_boards(spec, tmp_path):
  env = envs.make("carchess") if spec is None else map_env(tmp_path, spec)
  game = env.game
  boards = random_boards(game, np.random.default_rng(0), 300)
  g0 = game.init(jax.random.PRNGKey(0))
  batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(boards),) + x.shape), g0)
  batch = batch.replace(
    cars=jnp.asarray(np.stack([b[0] for b in boards])),
    red=jnp.asarray(np.stack([b[1] for b in boards])),
    counters=jnp.asarray(np.stack([b[2] for b in boards]), jnp.int32),
  )
  g2, scored, crashes = jax.device_get(jax.jit(jax.vmap(game.simulation_step))(batch))
  for k, (occ, red, counters) in enumerate(boards):
    cars = [(int(l), int(i)) for l, i in zip(*np.nonzero(occ))]
    want = reference_step(game.map, cars, red, counters)
    got = (
      {(int(l), int(i)) for l, i in zip(*np.nonzero(g2.cars[k]))},
      g2.counters[k].tolist(),
      int(scored[k]),
      int(crashes[k]),
    )
    assert got == (want[0], want[1], want[2], want[3]), f"board {k}"


def reference_move(game, cars, red, toggled, counters, rnd, turn, action):
  """One decision, literally: the toggle, then (after the last mover) the
  round's `sim_steps` reference steps and the bookkeeping. Returns (cars,
  red, toggled, counters, round, turn, chance lane, [spawned, scored,
  crashed, crashes] added, reward)."""
  m, p = game.map, game.params
  k = m.lights.index((action // m.width, action % m.width))
  red, toggled = red.copy(), toggled.copy()
  red[k] ^= True
  toggled[k] = True
  turn += 1
  totals = np.zeros(4, np.int64)
  if turn < game.num_players:
    return cars, red, toggled, counters, rnd, turn, game.num_lanes, totals, 0.0
  occ = {(int(l), int(i)) for l, i in zip(*np.nonzero(cars))}
  counters = list(counters)
  for _ in range(p["sim_steps"]):
    after, left, scored, crashes = reference_step(m, sorted(occ), red, counters)
    spawned = sum(counters) - sum(left)
    totals += (spawned, scored, len(occ) + spawned - scored - len(after), crashes)
    occ, counters = after, left
  cars = np.zeros_like(cars)
  for l, i in occ:
    cars[l, i] = True
  rnd += 1
  lane = 0 if rnd < p["rounds"] else game.num_lanes
  reward = p["score_reward"] * totals[1] + p["crash_reward"] * totals[3]
  toggled[:] = False
  return cars, red, toggled, np.array(counters), rnd, 0, lane, totals, reward


@pytest.mark.parametrize("spec", [None, MERGE], ids=["tutorial", "merge"])
def test_decision_matches_reference_on_random_states(spec, tmp_path):
  # The whole decision transition (toggle, the round's simulation steps,
  # rewards, bookkeeping) and the next observation against the references,
  # field by field, on 2000 random states; most are the round's last mover.
  env = envs.make("carchess") if spec is None else map_env(tmp_path, spec)
  game = env.game
  rng = np.random.default_rng(5)
  num, n, lights = 2000, game.num_players, game.num_lights
  boards = random_boards(game, rng, num)
  rnd = rng.integers(0, game.params["rounds"], num).astype(np.int32)
  turn = np.where(rng.random(num) < 0.8, n - 1, rng.integers(0, n, num)).astype(np.int32)
  toggled = np.zeros((num, lights), bool)
  action = np.zeros(num, np.int32)
  for k in range(num):
    order = rng.permutation(lights)
    toggled[k, order[: turn[k]]] = True
    r, c = game.map.lights[order[turn[k]]]
    action[k] = r * game.map.width + c
  totals = rng.integers(0, 50, (num, 4)).astype(np.int32)
  g0 = game.init(jax.random.PRNGKey(0))
  batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (num,) + x.shape), g0).replace(
    cars=jnp.asarray(np.stack([b[0] for b in boards])),
    red=jnp.asarray(np.stack([b[1] for b in boards])),
    toggled=jnp.asarray(toggled),
    counters=jnp.asarray(np.stack([b[2] for b in boards]), jnp.int32),
    round=jnp.asarray(rnd),
    turn=jnp.asarray(turn),
    chance_lane=jnp.full((num,), game.num_lanes, jnp.int32),
    spawned=jnp.asarray(totals[:, 0]),
    scored=jnp.asarray(totals[:, 1]),
    crashed=jnp.asarray(totals[:, 2]),
    crashes=jnp.asarray(totals[:, 3]),
  )

  @jax.jit
  def move(g, a):
    g2, rewards = jax.vmap(game.apply_action)(g, a)
    player = jnp.maximum(jax.vmap(game.current_player)(g2), 0)
    return g2, rewards, jax.vmap(game.observe)(g2, player), jax.vmap(game.legal_action_mask)(g2)

  g2, rewards, obs, mask = jax.device_get(move(batch, jnp.asarray(action)))
  assert np.all(rewards == rewards[:, :1])
  fields = ("cars", "red", "toggled", "counters", "round", "turn", "chance_lane")
  light_cells = [r * game.map.width + c for r, c in game.map.lights]
  for k, (cars, red, counters) in enumerate(boards):
    want = reference_move(game, cars, red, toggled[k], counters, rnd[k], turn[k], action[k])
    for name, value in zip(fields, want):
      np.testing.assert_array_equal(getattr(g2, name)[k], value, err_msg=f"state {k}: {name}")
    got_totals = [g2.spawned[k], g2.scored[k], g2.crashed[k], g2.crashes[k]]
    np.testing.assert_array_equal(got_totals, totals[k] + want[7], err_msg=f"state {k}: totals")
    assert rewards[k, 0] == want[8], f"state {k}: reward"
    player = want[5] if want[4] < game.params["rounds"] else 0
    want_obs = reference_observation(game, want[0], want[1], want[3], want[4], player, want[2])
    np.testing.assert_array_equal(obs[k], want_obs, err_msg=f"state {k}: observation")
    want_mask = np.zeros(env.num_actions, bool)
    want_mask[light_cells] = ~want[2]
    np.testing.assert_array_equal(mask[k], want_mask, err_msg=f"state {k}: legal mask")
  # The states cover the rules: cars score, crash, spawn and wait at red.
  assert g2.scored.sum() > totals[:, 1].sum() and g2.crashes.sum() > totals[:, 3].sum()
  assert g2.spawned.sum() > totals[:, 0].sum()


# Invariants over random play.


def test_invariants_over_random_play(env):
  game = env.game
  batch, steps = 256, env.max_game_length

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    s = jax.vmap(env.init)(jax.random.split(k0, batch))

    def body(s, k):
      a = jax.vmap(random_action)(s, jax.random.split(k, batch))
      s2 = jax.vmap(env.step)(s, a)
      return s2, (s.game, s2.game, s2.rewards, s.current_player)

    return jax.lax.scan(body, s, jax.random.split(k1, steps))[1]

  before, after, rewards, player = jax.device_get(run(jax.random.PRNGKey(7)))
  # Cars are conserved.
  on_board = after.cars.sum((-1, -2))
  assert np.array_equal(after.spawned, after.scored + after.crashed + on_board)
  assert after.spawned.max() > 0 and after.crashed.max() > 0 and after.scored.max() > 0
  # No two cars on one cell after a step.
  cells = game._cell
  flat = after.cars.reshape(steps * batch, -1)
  for row in flat[flat.any(-1)]:
    occupied = cells.reshape(-1)[row]
    assert len(occupied) == len(set(occupied.tolist()))
  # Counters stay within their caps.
  assert after.counters.min() >= 0 and np.all(after.counters <= game.capacities)
  # Rewards: equal for both players, only at the end of a round, bounded, and
  # equal to 2 per car scored minus the crash count.
  assert np.all(rewards[..., 0] == rewards[..., 1])
  r = rewards[..., 0]
  d_scored = after.scored - before.scored
  d_crash = after.crashes - before.crashes
  np.testing.assert_allclose(r, 2.0 * d_scored - d_crash)
  end = player == env.num_players - 1
  assert not np.any(r[~end])
  m, lanes = 5, 4
  stand = int(game._stand.sum())
  assert r.max() <= 2.0 * m * lanes and r.min() >= -1.0 * m * stand
  assert np.all(d_scored <= m * lanes)
  assert r[end].std() > 0


# Maps and parameters.


def test_tutorial_map_matches_rules_md():
  m = carchess_maps.load_map("tutorial")
  assert (m.height, m.width, m.num_lanes, m.max_lane_length) == (10, 10, 4, 10)
  assert m.lanes[0] == tuple((4, 9 - i) for i in range(10))
  assert m.lanes[1] == tuple((9 - i, 5) for i in range(10))
  assert m.lanes[2] == tuple((5, i) for i in range(10))
  assert m.lanes[3] == tuple((i, 4) for i in range(10))
  assert m.lights == ((3, 4), (4, 6), (5, 3), (6, 5))
  assert "tutorial" in carchess_maps.available_maps()
  assert carchess_maps.parse_map(carchess_maps.map_to_spec(m)) == m


def test_a_new_map_is_data_only(tmp_path):
  env = map_env(tmp_path, TRIPLE, players=1, rounds=3)
  # lanes + light + counters 0..1 + toggled + 1 player + 3 rounds (the
  # toggled plane is new in version 2).
  assert env.observation_shape == (5, 5, 3 + 1 + 2 + 1 + 1 + 3)
  assert env.num_chance_outcomes == 2  # floor((5 - 2) * 0.5) = 1
  out = jax.jit(
    lambda k: match.play_match(env, envs.random_policy, envs.random_policy, k, 8).score
  )(jax.random.PRNGKey(0))
  assert out.shape == (8,)


@pytest.mark.parametrize(
  "params,match",
  [
    (dict(map="nowhere"), "unknown map 'nowhere'; available maps: .*tutorial"),
    (dict(map="/nonexistent/x.json"), "cannot read map file"),
    (dict(players=5), "players must be in 1..4"),
    (dict(players=0), "players must be in 1..4"),
    (dict(rounds=0), "rounds must be >= 1"),
    (dict(sim_steps=0), "sim_steps must be >= 1"),
    (dict(density=0.0), r"density must be in \(0, 1\]"),
    (dict(spawn_min=3, spawn_max=2), "spawn_min <= spawn_max"),
    (dict(spawn_max=4.0), "must be of type int"),
  ],
)
def test_bad_params(params, match):
  with pytest.raises(ValueError, match=match):
    envs.make("carchess", **params)


@pytest.mark.parametrize(
  "change,match",
  [
    (dict(height=0), "height must be a positive integer"),
    (dict(lanes=[]), "'lanes' must be a non-empty list"),
    (dict(lanes=[{"start": [0, 0], "path": "EX"}]), "string of N/S/E/W"),
    (dict(lanes=[{"start": [0, 3], "path": "EEE"}]), "outside the 5 x 5 grid"),
    (dict(lanes=[{"cells": [[0, 0], [0, 2], [0, 3]]}]), "not neighbours"),
    (dict(lanes=[{"start": [0, 0], "path": "E"}]), "needs >= 3"),
    (dict(lanes=[{"start": [0, 0], "path": "EWE"}]), "visits a cell twice"),
    (dict(lights=[[4, 4]]), "not on a lane cell"),
    (dict(lights=[[2, 1], [2, 1]]), "two lights on one cell"),
  ],
)
def test_bad_maps(change, match):
  spec = {**TRIPLE, **change}
  with pytest.raises(ValueError, match=match):
    carchess_maps.parse_map(spec)
  with pytest.raises(ValueError, match="missing field"):
    carchess_maps.parse_map({"name": "x"})


# Policies.


def test_greedy_takes_the_best_round(env):
  # Lane 0's queue waits at its red light; every other lane is empty. Player 1
  # (the last mover) should release it: toggling light 1 lets both cars reach
  # the end within the round's 5 steps plus 4 more; no other light scores.
  g = board(env, cars=[(0, 3), (0, 2)], red=[True, True, True, True], turn=1)
  state = env.init(jax.random.PRNGKey(0))
  state = state.replace(
    game=g, current_player=jnp.int32(1), legal_action_mask=env.game.legal_action_mask(g)
  )
  policy = jax.jit(jax.vmap(carchess_bots.greedy_policy(env.game), in_axes=(None, 0)))
  picks = policy(state, jax.random.split(jax.random.PRNGKey(0), 16))
  assert set(np.asarray(picks).tolist()) == {46}
  values = carchess_bots.round_rewards(env.game, g, 4)
  assert float(values[1, 1]) == 4.0 and float(values[0, 0]) == 0.0
  # Within the round alone (5 steps) the released queue does not score yet.
  assert float(carchess_bots.round_rewards(env.game, g)[1, 1]) == 0.0


def test_policies_pick_legal_actions(env):
  for name in ("random", "greedy"):
    _, policy = envs.bots.make_bot(name, env)

    @jax.jit
    def run(key, policy=policy):
      s = jax.vmap(env.reset)(jax.random.split(key, 16))

      def body(s, k):
        ka, kc = jax.random.split(k)
        a = policy(s, ka)
        legal = jnp.take_along_axis(s.legal_action_mask, a[:, None], 1)[:, 0]
        s = jax.vmap(env.step)(s, a, jax.random.split(kc, 16))
        return s, legal

      return jax.lax.scan(body, s, jax.random.split(key, 20))[1]

    assert np.all(np.asarray(run(jax.random.PRNGKey(0))))
  with pytest.raises(ValueError, match="valid: random, .*greedy"):
    envs.bots.make_bot("smart", env)


@pytest.mark.slow
def test_greedy_beats_random():
  env = envs.make("carchess")
  scores = {}
  for name in ("random", "greedy"):
    _, pol = envs.bots.make_bot(name, env)
    scores[name] = np.asarray(
      jax.jit(lambda k: match.play_match(env, pol, pol, k, 1000).score)(jax.random.PRNGKey(0))
    )
  assert scores["greedy"].mean() > scores["random"].mean() + 10


LONG = {  # lane 0 has 40 cells: more than the 32 of the bit-mask simulation.
  "name": "long",
  "height": 4,
  "width": 40,
  "lanes": [{"start": [1, 0], "path": "E" * 39}, {"start": [3, 20], "path": "NNN"}],
  "lights": [[1, 19], [2, 20]],
}


def test_long_lanes_use_the_dense_simulation(tmp_path):
  # Lanes longer than 32 cells fall back to the dense boolean simulation;
  # it must follow the same rules.
  env = map_env(tmp_path, LONG)
  assert not env.game._bits  # pylint: disable=protected-access
  game = env.game
  boards = random_boards(game, np.random.default_rng(1), 100)
  g0 = game.init(jax.random.PRNGKey(0))
  batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (len(boards),) + x.shape), g0)
  batch = batch.replace(
    cars=jnp.asarray(np.stack([b[0] for b in boards])),
    red=jnp.asarray(np.stack([b[1] for b in boards])),
    counters=jnp.asarray(np.stack([b[2] for b in boards]), jnp.int32),
  )
  g2, scored, crashes = jax.device_get(jax.jit(jax.vmap(game.simulation_step))(batch))
  for k, (occ, red, counters) in enumerate(boards):
    cars = [(int(l), int(i)) for l, i in zip(*np.nonzero(occ))]
    want = reference_step(game.map, cars, red, counters)
    got = (
      {(int(l), int(i)) for l, i in zip(*np.nonzero(g2.cars[k]))},
      g2.counters[k].tolist(),
      int(scored[k]),
      int(crashes[k]),
    )
    assert got == (want[0], want[1], want[2], want[3]), f"board {k}"
  assert int(np.sum(crashes)) > 0 and int(np.sum(scored)) > 0
