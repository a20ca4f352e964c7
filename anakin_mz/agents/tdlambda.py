"""TD(lambda) self-play with a value network (`agent: tdlambda`), as the NDMZ
paper's model-free baseline (TD-Gammon, Tesauro 1995; lambda = 0.7, gamma =
1, Adam 1e-3 in the paper).

Playing: expectimax on the real game (`expectimax`), of
`search.expectimax_depth` moves: 1 (the default) is TD-Gammon's 1-ply
player, 2 also tries every reply to every chance outcome. Each legal move is
tried on the real game; its value is the move's reward plus the discounted value of the
successor, and a successor at a chance node is valued by the exact average
over its outcomes (`anakin_mz.core.lookahead`). The value network sees decision
nodes only, from the mover's point of view.

Its own config section, `tdlambda:` (`TDLambdaSection`), holds lambda.

Learning: online semi-gradient TD(lambda) with accumulating traces (Sutton &
Barto 2018, 12.2) on the sequence of decision nodes of each self-play game,
on the value `U(s) = sign(s) V(s)` of player 0 (sign -1 where an opponent
of player 0 moves in a two-player zero-sum game, so one trace follows a
game whose movers alternate). At each decision node S_t:

    e_t = gamma^k lambda e_{t-1} + grad U(S_t)        (k transitions since S_{t-1})
    delta_t = R + gamma^k U(S_{t+1}) - U(S_t)         (U = 0 at the end)
    w <- w + alpha delta_t e_t                       (at S_{t+1})

R is player 0's reward summed (discounted) over the transitions in between,
chance ones included. B lanes play at once, each with its own trace; one
optimizer step per iteration takes the mean of `delta_b e_b` over the lanes
that reached a decision node or the end of their game (the negated direction
is handed to the optimizer as a gradient, so Adam's step follows TD's
direction). With plain SGD, one lane gives exactly the update above
(`tests/test_tdlambda.py`).

Everything is jitted and vmapped like the Anakin step; `TDLambdaLearner` is
a `runtime.learner.BaseLearner` (init, init_run, specs, local_step,
jit_step), lanes split over the devices the same way, so the run loop,
TensorBoard and checkpoints are shared. There is no replay
buffer: each chunk plays `train.rollout_length` iterations (an iteration
plays the chance nodes ahead of every lane, up to `env.chance_run`, then one
move per lane) and makes one update per iteration.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Sequence, Tuple

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh

import envs
from envs.core import raw_key
from anakin_mz.core import lookahead
from anakin_mz.core.networks import NetworkConfig
from anakin_mz.runtime import mesh as mesh_lib
from anakin_mz.core import registry
from anakin_mz.runtime.guard import guarded
from anakin_mz.runtime.learner import BaseLearner
from anakin_mz.runtime.metrics import StepMetrics
from anakin_mz.core.search import SearchConfig, SearchOutput
from anakin_mz.core.types import Params, where_lanes


@dataclasses.dataclass(frozen=True)
class TDLambdaSection:
  """The `tdlambda:` section of a config (`agent: tdlambda`).

  Attributes:
    td_lambda: lambda, the trace decay (paper: 0.7; 1 gives Monte-Carlo
      targets). Configs saved before it moved here held it as
      `train.td_lambda` (`anakin-mz migrate` moves it).
  """

  td_lambda: float = 0.7

  def __post_init__(self):
    if not 0.0 <= self.td_lambda <= 1.0:
      raise ValueError(f"tdlambda td_lambda must be in [0, 1], got {self.td_lambda}")


class _ValueMLP(nn.Module):
  """Dense layers with SELU (the paper's MLP), then one linear output."""

  hidden: Sequence[int]

  @nn.compact
  def __call__(self, obs):
    x = obs.reshape((obs.shape[0], -1))
    for width in self.hidden:
      x = nn.selu(nn.Dense(width, kernel_init=nn.initializers.lecun_normal())(x))
    return nn.Dense(1, kernel_init=nn.initializers.lecun_normal())(x)[:, 0]


class ValueModel:
  """The TD(lambda) value network V(observation) (the mover's view) and the
  game it looks ahead in. `config.hidden` gives the layers (none: linear)."""

  def __init__(self, env: envs.Env, config: NetworkConfig, *, discount: float):
    self.env = env
    self.config = config
    self.discount = float(discount)
    self.observation_shape = tuple(env.observation_shape)
    self._net = _ValueMLP(tuple(config.hidden))

  def init(self, key: chex.PRNGKey) -> Params:
    return self._net.init(key, jnp.zeros((1,) + self.observation_shape, jnp.float32))

  def value(self, params: Params, observation: chex.Array) -> chex.Array:
    """`[M, *obs]` -> `[M]`."""
    return self._net.apply(params, jnp.asarray(observation, jnp.float32))


def expectimax_policy(model: ValueModel, params: Params, depth: int = 1) -> envs.OnePlyPolicy:
  """TD(lambda)'s player as an `envs.OnePlyPolicy`: its value network in
  `lookahead.expectimax_policy` of `depth` moves (1: TD-Gammon's greedy
  1-ply player, the chance after a move averaged exactly, one network call
  for all successors; exact evaluators may tabulate its successor values)."""
  return lookahead.expectimax_policy(
    model.env, lambda obs: model.value(params, obs), discount=model.discount, depth=depth
  )


def expectimax(
  model: ValueModel, params: Params, state: envs.State, depth: int = 1
) -> SearchOutput:
  """TD-Gammon's move choice at the batched decision states `state` `[B]`,
  searching `depth` moves (`search.expectimax_depth`).

  Returns a `SearchOutput`: `action` the legal move of highest value (the
  first of equals; 0 where no move is legal), `action_weights` its one-hot,
  `root_value` that value (mover's view), `search_tree` None.
  """
  action, value = expectimax_policy(model, params, depth).choose(state)
  return SearchOutput(
    action=action,
    action_weights=jax.nn.one_hot(action, state.legal_action_mask.shape[-1], dtype=jnp.float32),
    root_value=value,
    search_tree=None,
  )


# ------------------------------------------------------------ TD(lambda) core


@chex.dataclass(frozen=True)
class TDLanes:
  """What online TD(lambda) keeps per lane between decision nodes.

  Attributes:
    trace: the eligibility trace, params-shaped with a leading `[B]`.
    prev_obs: `[B, *obs]` observation of the last decision node S_t.
    prev_sign: `[B]` +1/-1, U(S_t) = prev_sign * V(prev_obs).
    has_prev: bool `[B]`, S_t exists (False at the start of a game).
    reward: `[B]` player 0's discounted reward since S_t.
    discount: `[B]` gamma^k, k transitions since S_t.
  """

  trace: chex.ArrayTree
  prev_obs: chex.Array
  prev_sign: chex.Array
  has_prev: chex.Array
  reward: chex.Array
  discount: chex.Array


def init_lanes(params: Params, observation_shape, num_envs: int) -> TDLanes:
  return TDLanes(
    trace=jax.tree.map(lambda p: jnp.zeros((num_envs,) + p.shape, p.dtype), params),
    prev_obs=jnp.zeros((num_envs,) + tuple(observation_shape), jnp.float32),
    prev_sign=jnp.ones((num_envs,), jnp.float32),
    has_prev=jnp.zeros((num_envs,), jnp.bool_),
    reward=jnp.zeros((num_envs,), jnp.float32),
    discount=jnp.ones((num_envs,), jnp.float32),
  )


def player_sign(player: chex.Array, payoff: str) -> chex.Array:
  """`[B]`: +1 where V from `player`'s view is player 0's value, else -1."""
  return lookahead.sign(player, jnp.zeros_like(player), payoff == "zero_sum")


def td_transition(lanes: TDLanes, moved: chex.Array, reward0: chex.Array, gamma: float) -> TDLanes:
  """Accumulates player 0's reward `reward0` `[B]` of a transition made in
  the lanes where `moved` `[B]`."""
  return lanes.replace(
    reward=jnp.where(moved, lanes.reward + lanes.discount * reward0, lanes.reward),
    discount=jnp.where(moved, lanes.discount * gamma, lanes.discount),
  )


def td_learn(
  params: Params,
  opt_state: optax.OptState,
  lanes: TDLanes,
  player: chex.Array,
  observation: chex.Array,
  *,
  model: ValueModel,
  optimizer: optax.GradientTransformation,
  payoff: str,
  total: Callable[[chex.ArrayTree], chex.ArrayTree] = lambda x: x,
) -> Tuple[Params, optax.OptState, Dict[str, chex.Array]]:
  """The update at S_{t+1}: lanes whose `player` `[B]` is a decision node or
  `envs.TERMINAL` and that have an S_t get delta_t; one optimizer step along
  the mean of delta_b e_b (no step when no lane has one). `total` sums a
  pytree over the other holders of lanes (the devices: `mesh.psum`), so the
  mean runs over every lane of the run.

  Returns (params, opt_state, info): info holds `delta` `[B]` (0 where
  invalid), `valid` `[B]`, `applied` bool `[]` and `direction_norm` `[]`.
  """
  num_envs = player.shape[0]
  arrived = (player >= 0) | (player == envs.TERMINAL)
  valid = arrived & lanes.has_prev
  v = model.value(params, jnp.concatenate([lanes.prev_obs, observation]))
  u_prev = lanes.prev_sign * v[:num_envs]
  u_now = jnp.where(player >= 0, player_sign(player, payoff) * v[num_envs:], 0.0)
  delta = jnp.where(valid, lanes.reward + lanes.discount * u_now - u_prev, 0.0)
  count = jnp.sum(valid).astype(jnp.float32)
  direction = jax.tree.map(lambda e: jnp.tensordot(delta, e, axes=1), lanes.trace)
  direction, count = total((direction, count))
  grads = jax.tree.map(lambda d: -d / jnp.maximum(count, 1.0), direction)
  updates, new_opt = optimizer.update(grads, opt_state, params)
  new_params = optax.apply_updates(params, updates)
  applied = count > 0
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(applied, n, o), new, old)
  info = dict(delta=delta, valid=valid, applied=applied, direction_norm=optax.tree.norm(grads))
  return keep(new_params, params), keep(new_opt, opt_state), info


def td_visit(
  params: Params,
  lanes: TDLanes,
  player: chex.Array,
  observation: chex.Array,
  *,
  model: ValueModel,
  trace_decay: float,
  payoff: str,
) -> TDLanes:
  """At a decision node S_t (lanes where `player` >= 0): e_t = gamma^k
  lambda e_{t-1} + grad U(S_t), and S_t becomes the lane's previous node."""
  at = player >= 0
  sign = player_sign(player, payoff)
  grad = jax.vmap(jax.grad(lambda p, o: model.value(p, o[None])[0]), in_axes=(None, 0))(
    params, observation
  )
  decay = trace_decay * lanes.discount

  def new_trace(e, g):
    shape = (-1,) + (1,) * (e.ndim - 1)
    return jnp.where(at.reshape(shape), decay.reshape(shape) * e + sign.reshape(shape) * g, e)

  return TDLanes(
    trace=jax.tree.map(new_trace, lanes.trace, grad),
    prev_obs=jnp.where(
      at.reshape((-1,) + (1,) * (observation.ndim - 1)), observation, lanes.prev_obs
    ),
    prev_sign=jnp.where(at, sign, lanes.prev_sign),
    has_prev=lanes.has_prev | at,
    reward=jnp.where(at, 0.0, lanes.reward),
    discount=jnp.where(at, 1.0, lanes.discount),
  )


def td_end(lanes: TDLanes, ended: chex.Array) -> TDLanes:
  """Clears the lanes whose game ended (`ended` `[B]`): no trace, no S_t."""
  clear = lambda x, zero: jnp.where(ended.reshape((-1,) + (1,) * (x.ndim - 1)), zero, x)
  return TDLanes(
    trace=jax.tree.map(lambda e: clear(e, 0.0), lanes.trace),
    prev_obs=lanes.prev_obs,
    prev_sign=lanes.prev_sign,
    has_prev=lanes.has_prev & ~ended,
    reward=clear(lanes.reward, 0.0),
    discount=clear(lanes.discount, 1.0),
  )


# ------------------------------------------------------------------ learner


@chex.dataclass(frozen=True)
class TDActor:
  """The self-play lanes of TD(lambda).

  Attributes:
    env_state: `envs.State` `[B]`.
    episode_return: `[B, P]`, episode_length `[B]`: the current games so far.
    key: `[B, 2]` uint32, each lane's PRNG key (chance outcomes, restarts).
    td: `TDLanes`.
  """

  env_state: envs.State
  episode_return: chex.Array
  episode_length: chex.Array
  key: chex.Array
  td: TDLanes


@chex.dataclass(frozen=True)
class TDTrainState:
  """Everything a TD(lambda) run needs to continue (global arrays; the lanes
  split over the devices)."""

  params: chex.ArrayTree
  opt_state: chex.ArrayTree
  actor: TDActor
  key: chex.Array
  update_step: chex.Array
  env_steps: chex.Array


class TDLambdaLearner(BaseLearner):
  """TD(lambda) self-play (module docstring), a `BaseLearner`."""

  def __init__(self, config, mesh: Optional[Mesh] = None):
    super().__init__(config, mesh)
    tc = config.train
    self.iterations = tc.rollout_length
    self.transitions_per_chunk = tc.rollout_length * tc.num_envs
    self.updates_per_chunk = tc.rollout_length

  def init_actor(self, params, key) -> TDActor:
    env, num_envs = self.env, self.config.train.num_envs
    k_init, k_lanes = jax.random.split(key)
    return TDActor(
      env_state=jax.vmap(env.init)(jax.random.split(k_init, num_envs)),
      episode_return=jnp.zeros((num_envs, env.num_players), jnp.float32),
      episode_length=jnp.zeros((num_envs,), jnp.int32),
      key=jax.random.split(k_lanes, num_envs),
      td=init_lanes(params, env.observation_shape, num_envs),
    )

  def init(self, key: chex.Array) -> TDTrainState:
    k_params, k_actor, k_run = jax.random.split(raw_key(key), 3)
    params = self.network.init(k_params)
    return TDTrainState(
      params=params,
      opt_state=self.optimizer.init(params),
      actor=self.init_actor(params, k_actor),
      key=k_run,
      update_step=jnp.int32(0),
      env_steps=jnp.int32(0),
    )

  def specs(self, state) -> TDTrainState:
    """The lanes (`actor`, traces included) split over the mesh's data axis,
    all else replicated."""
    like = lambda tree, spec: jax.tree.map(lambda _: spec, tree)
    return like(state, mesh_lib.REPLICATED).replace(actor=like(state.actor, mesh_lib.LANES))

  # ------------------------------------------------------------------ step
  def _transition(self, actor: TDActor, moved, action) -> Tuple[TDActor, chex.Array]:
    """Plays `action` `[B]` in the lanes where `moved`."""
    nxt = jax.vmap(self.env.step)(actor.env_state, action)
    rewards = jnp.where(moved[:, None], nxt.rewards, 0.0)
    actor = actor.replace(
      env_state=where_lanes(moved, nxt, actor.env_state),
      episode_return=actor.episode_return + rewards,
      episode_length=actor.episode_length + moved.astype(jnp.int32),
      td=td_transition(actor.td, moved, rewards[:, 0], self.config.discount),
    )
    return actor, jnp.sum(moved).astype(jnp.int32)

  def _iteration(self, carry, key):
    params, opt_state, actor = carry
    env = self.env
    payoff = env.payoff
    lane_keys = jax.vmap(lambda k: jax.random.split(k, 2 + env.chance_run))(actor.key)
    transitions = jnp.int32(0)
    for i in range(env.chance_run):  # the chance nodes ahead
      s = actor.env_state
      outcome = jax.vmap(envs.chance_outcome)(s, lane_keys[:, 2 + i])
      actor, n = self._transition(actor, s.current_player == envs.CHANCE, outcome)
      transitions += n
    s = actor.env_state
    params, opt_state, info = td_learn(
      params,
      opt_state,
      actor.td,
      s.current_player,
      s.observation,
      model=self.network,
      optimizer=self.optimizer,
      payoff=payoff,
      total=mesh_lib.psum,
    )
    # Finished games restart (their last delta is applied above).
    ended = s.current_player == envs.TERMINAL
    fresh = jax.vmap(env.init)(lane_keys[:, 1])
    stats = dict(
      episodes=jnp.sum(ended).astype(jnp.int32),
      return_sum=jnp.sum(jnp.where(ended[:, None], actor.episode_return, 0.0), axis=0),
      length_sum=jnp.sum(jnp.where(ended, actor.episode_length, 0)).astype(jnp.int32),
    )
    actor = actor.replace(
      env_state=where_lanes(ended, fresh, s),
      episode_return=jnp.where(ended[:, None], 0.0, actor.episode_return),
      episode_length=jnp.where(ended, 0, actor.episode_length),
      td=td_end(actor.td, ended),
      key=lane_keys[:, 0],
    )
    s = actor.env_state
    td = td_visit(
      params,
      actor.td,
      s.current_player,
      s.observation,
      model=self.network,
      trace_decay=self.config.agent_config.td_lambda,
      payoff=payoff,
    )
    actor = actor.replace(td=td)
    move = expectimax(self.network, params, s, self.config.search.expectimax_depth)
    decision = s.current_player >= 0
    actor, n = self._transition(actor, decision, move.action)
    transitions += n
    sums = mesh_lib.psum(
      dict(
        stats,
        transitions=transitions,
        decision_steps=jnp.sum(decision).astype(jnp.int32),
        valid=jnp.sum(info["valid"]).astype(jnp.int32),
        abs_delta=jnp.sum(jnp.abs(info["delta"])),
        value=jnp.sum(jnp.where(decision, move.root_value, 0.0)),
      )
    )
    metrics = dict(
      {k: sums[k] for k in (*stats, "transitions", "decision_steps")},
      updates_applied=info["applied"].astype(jnp.int32),
      td_error=sums["abs_delta"] / jnp.maximum(sums["valid"], 1),
      direction_norm=info["direction_norm"],
      value=sums["value"] / jnp.maximum(sums["decision_steps"], 1),
    )
    return (params, opt_state, actor), metrics

  def local_step(self, state: TDTrainState) -> Tuple[TDTrainState, StepMetrics]:
    """One chunk of this device's share of the state (`mesh.OnMesh.jit_step`
    runs it on every device): `rollout_length` iterations of self-play on
    its lanes, one TD(lambda) update each, averaged over every lane. The
    NaN guard checks the TD errors, the update norms and the parameters
    (`guard.guarded`): a chunk with a non-finite value is not applied."""
    key, k_iter = jax.random.split(state.key)
    (params, opt_state, actor), per_iter = jax.lax.scan(
      self._iteration,
      (state.params, state.opt_state, state.actor),
      jax.random.split(k_iter, self.iterations),
    )
    checked = {"td_error": per_iter["td_error"], "grad_norm": per_iter["direction_norm"]}
    params, opt_state, applied, nonfinite, first_bad = guarded(
      checked, params, opt_state, state.params, state.opt_state
    )
    totals = {
      k: jnp.sum(per_iter[k], axis=0)
      for k in (
        "episodes",
        "return_sum",
        "length_sum",
        "transitions",
        "decision_steps",
        "updates_applied",
      )
    }
    done_updates = jnp.where(applied, totals["updates_applied"], 0)
    metrics = StepMetrics(
      episodes=totals["episodes"],
      return_sum=totals["return_sum"],
      length_sum=totals["length_sum"],
      decision_steps=totals["decision_steps"],
      transitions=totals["transitions"],
      updates_applied=done_updates,
      terms=dict(
        td_error=jnp.mean(per_iter["td_error"]),
        grad_norm=jnp.mean(per_iter["direction_norm"]),
        value=jnp.mean(per_iter["value"]),
      ),
      nonfinite=nonfinite,
      nonfinite_update=first_bad,
    )
    new_state = TDTrainState(
      params=params,
      opt_state=opt_state,
      actor=actor,
      key=key,
      update_step=state.update_step + done_updates,
      env_steps=state.env_steps + totals["transitions"],
    )
    return new_state, metrics


def search(
  params: Params,
  state: envs.State,
  key: chex.PRNGKey,
  *,
  model: ValueModel,
  env: envs.Env,
  config: SearchConfig,
  temperature: chex.Numeric,
) -> SearchOutput:
  """TD(lambda)'s `act.SearchFn`: its expectimax of
  `config.expectimax_depth` moves (`expectimax`; no tree, `search_tree`
  None; key, the other search settings and temperature unused)."""
  del key, env, temperature
  return expectimax(model, params, state, config.expectimax_depth)


AGENT = registry.register(
  registry.AgentSpec(
    name="tdlambda",
    learner=TDLambdaLearner,
    model=lambda config, env: ValueModel(env, config.network, discount=config.discount),
    greedy=expectimax_policy,
    value=lambda model, params: lambda obs: model.value(params, obs),
    search=search,
    player=lambda model, params, env, config: expectimax_policy(
      model, params, config.expectimax_depth
    ),
    plays="{depth}-ply expectimax",
    capabilities=registry.Capabilities(true_model=True, two_sided_value=True),
    section=TDLambdaSection,
  )
)
