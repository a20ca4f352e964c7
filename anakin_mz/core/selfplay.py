"""Self-play: B games in parallel (vmap) in a loop of search-and-act steps.

At decision nodes the agent searches (its `act.SearchFn`: NDMZ's is
`search.ndmz_search` on the learned model) and samples its move from the
visit counts with a temperature. At chance nodes the outcome is sampled
from the game's `chance_probs` and fed to the model as the unified
action `num_actions + outcome`. Finished games restart at once (the lane's
next transition belongs to a new episode), so every lane always plays.

Searching only where a decision is made. A search on B lanes costs the same
whether or not its result is used (vmap runs every lane), so self-play must
not call it while some lanes sit at chance nodes. Each loop iteration first
advances every lane through up to `env.chance_run` chance nodes (no search;
lanes at a decision node wait), then searches all B lanes, which are now at
decision nodes, and makes one move in each. Only where a chance run is longer
than `env.chance_run` (rare) is a lane still at a chance node at the search;
it then plays its chance node and that lane's search result is unused.
`search_at_chance=True` is the old path: one transition per lane per search,
searching at chance nodes too (the benchmark's baseline).

The iterations write `[I, chance_run + 1, B]` slots; a slot where a lane had
nothing to do is marked invalid and `replay.add(..., drop_invalid=True)`
packs each lane's valid steps. Each lane has its own quota: it plays whole
iterations until it has made `num_steps` transitions in the chunk, less
what it made beyond its quota in the last one (`ActorState.surplus`, at most
`chance_run`), then waits (its slots invalid) until every lane of the chunk
is done. So every lane makes exactly `num_steps` transitions per chunk in
the long run (the replay ratio is the one configured), and a lane's chunk
depends on nothing but its own game: lanes split over devices need no
count of the others' transitions (no collective inside the loop), and any
device count plays the same games.

Each lane draws its chance outcomes and restarts from its own key stream, one
split per transition, and searches with its own key
(`jax.random.split(key, B)[b]` for the lane's global index b), so a lane's
game depends only on its keys and on what the search decides, not on how
lanes and chance runs are scheduled or laid out over devices: with a
deterministic search both paths play the very same games
(`tests/test_selfplay.py`).
"""

from __future__ import annotations

import functools
from typing import Callable, Optional, Tuple

import chex
import jax
import jax.numpy as jnp

import envs
from envs.core import raw_key
from anakin_mz.core.act import SearchFn, model_search
from anakin_mz.core.replay import Transition
from anakin_mz.core.search import SearchConfig, SearchOutput
from anakin_mz.core.types import Model, Params, where_lanes

# siblings(params, state [B]) -> (action int32 [B, S], q float32 [B, S]): the
# legal moves of each lane and their values one ply deep on the real game
# (`lookahead.siblings`), recorded for the sibling-value term.
SiblingFn = Callable[[Params, envs.State], Tuple[chex.Array, chex.Array]]


@chex.dataclass(frozen=True)
class ActorState:
  """The self-play lanes.

  Attributes:
    env_state: `envs.State` batched `[B]`, never done (lanes restart).
    episode_return: `[B, P]` rewards so far in each lane's current episode.
    episode_length: `[B]` transitions so far in each lane's current episode.
    key: `[B, 2]` uint32, each lane's PRNG key (chance outcomes, restarts).
    surplus: int32 `[B]` transitions each lane made beyond its quota in the
      last chunk (`rollout`), taken off its next quota.
  """

  env_state: envs.State
  episode_return: chex.Array
  episode_length: chex.Array
  key: chex.Array
  surplus: chex.Array


@chex.dataclass(frozen=True)
class RolloutStats:
  """Totals over one rollout chunk (scalars, or `[P]` for returns)."""

  episodes: chex.Array  # completed episodes
  return_sum: chex.Array  # [P] summed final returns of completed episodes
  length_sum: chex.Array  # summed lengths (transitions) of completed episodes
  decision_steps: chex.Array  # transitions at decision nodes
  searches: chex.Array  # lane-searches run (B per search call)
  transitions: chex.Array  # all valid transitions


def init_actors(env: envs.Env, key: chex.PRNGKey, num_envs: int) -> ActorState:
  """`num_envs` fresh games (each may start at a chance node), for a key
  of either flavour (the lanes keep raw keys)."""
  k_init, k_lanes = jax.random.split(raw_key(key))
  state = jax.vmap(env.init)(jax.random.split(k_init, num_envs))
  return ActorState(
    env_state=state,
    episode_return=jnp.zeros((num_envs, env.num_players), jnp.float32),
    episode_length=jnp.zeros((num_envs,), jnp.int32),
    key=jax.random.split(k_lanes, num_envs),
    surplus=jnp.zeros((num_envs,), jnp.int32),
  )


def _play(
  actor: ActorState,
  act: chex.Array,
  live: chex.Array,
  move: chex.Array,
  search: SearchOutput | None,
  *,
  env: envs.Env,
  siblings: Optional[Tuple[chex.Array, chex.Array]] = None,
) -> Tuple[ActorState, Transition, RolloutStats]:
  """One transition in the lanes where `act` and `live` `[B]` are True.
  `siblings`: the lanes' `SiblingFn` output to record at decision steps
  (None: the record has none).

  A lane at a chance node plays an outcome drawn with its own key; a lane at a
  decision node plays `move` `[B]` (the search's action). Lanes that finish
  restart from a fresh game. Other lanes are left unchanged and their record
  is invalid. (`act` says which lanes this kind of step moves: those at a
  chance node, or all; `live`, which lanes still play in the chunk. Kept
  apart, not and-ed into one mask, because XLA compiles the rollout twice
  as fast when the transition is masked by `act` alone and the lanes that
  are not live are restored after it.)
  """
  num_envs = act.shape[0]
  s = actor.env_state
  keys = jax.vmap(lambda k: jax.random.split(k, 3))(actor.key)
  lane_key, k_chance, k_reset = keys[:, 0], keys[:, 1], keys[:, 2]
  is_chance = s.current_player == envs.CHANCE
  outcome = jax.vmap(envs.chance_outcome)(s, k_chance)
  env_action = jnp.where(is_chance, outcome, move).astype(jnp.int32)
  unified = jnp.where(is_chance, env.num_actions + outcome, move)
  nxt = jax.vmap(env.step)(s, env_action)
  counted = act & live
  decision = counted & (s.current_player >= 0)
  if search is None:
    policy = jnp.zeros_like(s.legal_action_mask, jnp.float32)
    value = jnp.zeros((num_envs,), jnp.float32)
  else:
    policy = jnp.where(decision[:, None], search.action_weights, 0.0)
    value = jnp.where(decision, search.root_value, 0.0)
  record = Transition(
    observation=s.observation,
    player=s.current_player,
    action=unified.astype(jnp.int32),
    rewards=nxt.rewards,
    search_policy=policy,
    search_value=value,
    chance_probs=s.chance_probs,
    next_player=nxt.current_player,
    done=nxt.done,
    truncated=nxt.truncated,
    valid=counted,
    legal_action_mask=s.legal_action_mask,  # kept only by buffers that ask for it
  )
  if siblings is not None:
    sib_action, sib_q = siblings
    record = record.replace(
      sibling_action=jnp.where(decision[:, None], sib_action, -1).astype(jnp.int32),
      sibling_q=jnp.where(decision[:, None], sib_q, 0.0),
    )
  ret = actor.episode_return + nxt.rewards
  length = actor.episode_length + 1
  done = act & nxt.done
  counted_done = done & live
  stats = RolloutStats(
    episodes=jnp.sum(counted_done).astype(jnp.int32),
    return_sum=jnp.sum(jnp.where(counted_done[:, None], ret, 0.0), axis=0),
    length_sum=jnp.sum(jnp.where(counted_done, length, 0)).astype(jnp.int32),
    decision_steps=jnp.sum(decision).astype(jnp.int32),
    searches=jnp.int32(0 if search is None else num_envs),
    transitions=jnp.sum(counted).astype(jnp.int32),
  )
  fresh = jax.vmap(env.init)(k_reset)
  env_state = where_lanes(done, fresh, where_lanes(act, nxt, s))
  played = ActorState(
    env_state=env_state,
    episode_return=jnp.where(
      done[:, None], 0.0, jnp.where(act[:, None], ret, actor.episode_return)
    ),
    episode_length=jnp.where(done, 0, jnp.where(act, length, actor.episode_length)),
    key=jnp.where(act[:, None], lane_key, actor.key),
    surplus=actor.surplus,
  )
  return where_lanes(live, played, actor), record, stats


def best_sibling(siblings: Tuple[chex.Array, chex.Array], fallback: chex.Array) -> chex.Array:
  """`[B]` the move of the highest sibling value in each lane (the first of
  equal ones), from a `SiblingFn`'s (action `[B, S]`, q `[B, S]`); `fallback`
  `[B]` where a lane has no sibling (not at a decision node: a chance run
  longer than `env.chance_run`, where the move is not played)."""
  action, q = siblings
  valid = action >= 0
  slot = jnp.argmax(jnp.where(valid, q, -jnp.inf), axis=-1)
  best = jnp.take_along_axis(action, slot[:, None], axis=-1)[:, 0]
  return jnp.where(jnp.any(valid, axis=-1), best, fallback).astype(jnp.int32)


def lane_search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  network: Model,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
  search: SearchFn = model_search,
  lane0: chex.Numeric = 0,
  total_lanes: int | None = None,
) -> SearchOutput:
  """`search` (the agent's `act.SearchFn`, on its model `network`) on the
  lanes `state` `[B]`, one search per lane (vmapped, a batch of 1 inside)
  with the lane's own key `jax.random.split(key, total_lanes)[lane0 + b]`:
  `state` may be a block of
  `total_lanes` lanes starting at global lane `lane0` (a device's lanes),
  and a lane's search depends on its own key only, not on the layout. (A
  batched search would draw its noise for the batch as a whole, and gathers
  across it.)"""
  num = state.current_player.shape[0]
  keys = jax.random.split(key, total_lanes or num)
  keys = jax.lax.dynamic_slice_in_dim(keys, jnp.asarray(lane0, jnp.int32), num)

  def one(s, k):
    out = search(
      params,
      jax.tree.map(lambda x: x[None], s),
      k,
      model=network,
      env=env,
      config=config,
      temperature=temperature,
    )
    return jax.tree.map(lambda x: x[0], out)

  return jax.vmap(one)(state, keys)


def rollout(
  params: Params,
  actor: ActorState,
  key: chex.PRNGKey,
  *,
  env: envs.Env,
  network: Model,
  config: SearchConfig,
  num_steps: int,
  temperature: chex.Numeric,
  search: SearchFn = model_search,
  search_at_chance: bool = False,
  lane0: chex.Numeric = 0,
  total_lanes: int | None = None,
  siblings: Optional[SiblingFn] = None,
  play_siblings: bool = False,
) -> Tuple[ActorState, Transition, RolloutStats]:
  """Plays `num_steps` transitions in each lane (over time; see the module
  docstring).

  Args:
    params, actor, key: network parameters, the lanes, a PRNG key.
    env, network, config: the game, the agent's model and the search
      settings.
    search: the agent's search (`act.SearchFn`; default the NDMZ search on
      a learned model).
    num_steps: T, transitions per lane per chunk.
    temperature: self-play move temperature.
    search_at_chance: the old path: search at every node, one transition per
      lane per search.
    lane0, total_lanes: `actor` holds lanes `lane0 ..` of `total_lanes` (a
      device's block; default: all of them), for the lanes' search keys.
    siblings: a `SiblingFn` whose moves and values each decision step's
      record keeps (`Transition.sibling_q`), or None (records without them).
      Evaluated with `params`, beside the search.
    play_siblings: each decision's move is the sibling with the highest
      value (the first of equals), not the search's (`TrainConfig.selfplay_player`
      "value"); the search still runs and its record is kept. Needs
      `siblings` valuing every lane.

  Returns:
    The new actor state, the `Transition` record `[I * (R + 1), B]` (R =
    `env.chance_run`, 0 with `search_at_chance`; I = T iterations at most,
    invalid slots where a lane had nothing to do; exactly `[T, B]`, all valid,
    with `search_at_chance`) and the chunk's `RolloutStats`.
  """
  if play_siblings and siblings is None:
    raise ValueError("play_siblings plays the best sibling: pass the siblings function")
  num_envs = actor.episode_length.shape[0]
  run = 0 if search_at_chance else env.chance_run
  quota = num_steps - actor.surplus  # [B]
  no_move = jnp.zeros((num_envs,), jnp.int32)
  slots = (num_envs, env.max_legal_actions)
  # Chance steps record no sibling moves, in the same fields as decision steps.
  no_sib = None if siblings is None else (jnp.full(slots, -1, jnp.int32), jnp.zeros(slots))

  def iteration(actor: ActorState, made: chex.Array, key: chex.PRNGKey):
    active = made < quota  # lanes still short of their quota play a whole iteration
    records, stats = [], []
    for _ in range(run):  # chance nodes, no search
      at_chance = actor.env_state.current_player == envs.CHANCE
      actor, rec, st = _play(actor, at_chance, active, no_move, None, env=env, siblings=no_sib)
      records.append(rec)
      stats.append(st)
    out = lane_search(
      params,
      actor.env_state,
      key,
      network=network,
      env=env,
      config=config,
      temperature=temperature,
      search=search,
      lane0=lane0,
      total_lanes=total_lanes,
    )
    everyone = jnp.ones((num_envs,), jnp.bool_)
    sib = None if siblings is None else siblings(params, actor.env_state)
    move = best_sibling(sib, out.action) if play_siblings else out.action
    actor, rec, st = _play(actor, everyone, active, move, out, env=env, siblings=sib)
    records.append(rec)
    stats.append(st)
    made = made + sum(r.valid.astype(jnp.int32) for r in records)
    stack = lambda *xs: jnp.stack(xs)
    total = lambda *xs: functools.reduce(jnp.add, xs)
    return actor, made, jax.tree.map(stack, *records), jax.tree.map(total, *stats)

  made0 = jnp.zeros((num_envs,), jnp.int32)
  example = jax.eval_shape(iteration, actor, made0, key)[2:]
  zeros = lambda x: jnp.zeros((num_steps,) + x.shape, x.dtype)
  records0, stats0 = jax.tree.map(zeros, example[0]), example[1]
  stats0 = jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), stats0)

  def cond(carry):
    i, _, made, _, _, _ = carry
    return (i < num_steps) & jnp.any(made < quota)

  def body(carry):
    i, actor, made, records, key, stats = carry
    key, k = jax.random.split(key)
    actor, made, rec, st = iteration(actor, made, k)
    records = jax.tree.map(lambda r, x: r.at[i].set(x), records, rec)
    stats = jax.tree.map(jnp.add, stats, st)
    return i + 1, actor, made, records, key, stats

  _, actor, made, records, _, stats = jax.lax.while_loop(
    cond, body, (jnp.int32(0), actor, made0, records0, key, stats0)
  )
  # Iterations that did not run stay all-zero records: valid False.
  records = jax.tree.map(lambda x: x.reshape((num_steps * (run + 1),) + x.shape[2:]), records)
  actor = actor.replace(surplus=made - quota)
  return actor, records, stats
