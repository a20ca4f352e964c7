"""The game contract: a pure game core (`Game`) and the shared adapter (`Env`).

A `Game` holds only the rules of one game. `Env` wraps a game and adds, once
for every game, the behaviour that pgx keeps in `pgx.core.Env.step`:

* a finished game (terminated or truncated) is absorbing, with zero rewards;
* an illegal action inside jit ends the game: the mover loses (see
  `Env.step`) and `State.illegal_action` is set;
* `Env.check_action` raises a clear `ValueError` for Python callers;
* chance is an explicit player: at a chance node (`current_player == CHANCE`)
  the action passed to `Env.step` is a chance-outcome index, drawn by the
  caller from `State.chance_probs`. `Env.step(state, action, key)` samples the
  chance nodes that follow for callers that do not model chance.
"""

from __future__ import annotations

import abc
from typing import Mapping, Optional, Tuple, Union

import jax
import jax.numpy as jnp
from flax import struct

from envs.fusion import materialize, materialize_small
from envs.keys import key_words, open_uniforms, raw_key, single_key

# Values of `State.current_player` that are not a player index.
CHANCE = -1
TERMINAL = -2

PAYOFF_KINDS = ("single", "zero_sum", "collaborative")

ParamValue = Union[int, float, bool, str]
GameState = object  # Any pytree of arrays with fixed shapes, owned by a Game.


def chance_outcome(state: "State", key: jax.Array) -> jax.Array:
  """int32 `[...]`: chance outcomes drawn from `state.chance_probs` `[..., C]`,
  one key for the whole batch. The one chance sampler: self-play, matches,
  the tools, and (through `_inverse_cdf`, with the same rule) `Env.step(...,
  key)`, `reset` and `sample_chance` draw every outcome by inverse CDF from
  one uniform, so an outcome of probability 0 is never drawn. Meaningless
  (but defined) where the state is not a chance node."""
  probs = state.chance_probs
  u = 1.0 - jax.random.uniform(raw_key(key), probs.shape[:-1], probs.dtype)  # (0, 1]
  return _inverse_cdf(probs, u)


@struct.dataclass
class State:
  """State of one game, as seen through `Env`. Every field has a fixed shape.

  Attributes:
    current_player: int32 `[]`. `0..num_players-1` at a decision node,
      `CHANCE` (-1) at a chance node, `TERMINAL` (-2) once the game is over
      (terminated or truncated).
    legal_action_mask: bool `[num_actions]`. All False except at decision
      nodes, where at least one entry is True.
    chance_probs: float32 `[num_chance_outcomes]`. Sums to 1 at chance nodes,
      all zeros elsewhere.
    observation: float32 `observation_shape`, from the point of view of the
      mover at decision nodes (of `Game.perspective` elsewhere).
    rewards: float32 `[num_players]`, the rewards of the last transition (the
      sum over the transitions of `Env.step(..., key)`).
    terminated: bool `[]`, the game ended by its rules (or an illegal action).
    truncated: bool `[]`, the game hit `max_game_length` transitions first.
    step_count: int32 `[]`, the transitions so far, chance ones included.
    illegal_action: bool `[]`, the game ended because of an illegal action or
      an impossible chance outcome.
    game: the game core's own state pytree.
  """

  current_player: jax.Array
  legal_action_mask: jax.Array
  chance_probs: jax.Array
  observation: jax.Array
  rewards: jax.Array
  terminated: jax.Array
  truncated: jax.Array
  step_count: jax.Array
  illegal_action: jax.Array
  game: GameState

  @property
  def done(self) -> jax.Array:
    """bool `[]`: terminated or truncated."""
    return self.terminated | self.truncated

  @property
  def is_chance(self) -> jax.Array:
    """bool `[]`: a chance node."""
    return self.current_player == CHANCE


class Game(abc.ABC):
  """The pure rules of one game. Subclass it, set the class attributes and
  register it with `envs.registry.register`.

  Class attributes:
    name: registry id, e.g. "catch".
    max_chance_run: how many consecutive chance nodes `Env.step(..., key)`
      unrolls after a transition (pgx style: selects, no loop under vmap):
      the longest run that can follow any transition, chance ones included.
    max_initial_chance_run: the same for `Env.reset`, from `init` (defaults
      to `max_chance_run`).
    chance_run_exact: True when no run of chance nodes is ever longer than
      these bounds; otherwise a `while_loop` samples the (rare) rest.
    materialize_state: True to compute the game state's small leaves once
      per game after a transition, before the mask and the observation
      read them (see `materialize`). A speed setting, not a rule: it pays
      where `legal_action_mask` and `observe` derive much from those scalars
      (EinStein, Carchess: 1.2x), and costs a product where they are cheap
      or materialize their own inputs (Catch, Nannon, Breakthrough: 1.06-1.2x
      without it).
    version: bump it when the rules or the encodings change, so that old
      checkpoints are rejected.
    payoff: one of `PAYOFF_KINDS`.
    default_params: parameter name -> default value. `envs.make` accepts only
      these names, with values of the default's type.

  The methods are pure and jittable; `g` is the game's own state pytree.
  """

  name: str = ""
  version: int = 1
  payoff: str = ""
  default_params: Mapping[str, ParamValue] = {}
  max_chance_run: int = 1
  chance_run_exact: bool = False
  materialize_state: bool = True

  @property
  def max_initial_chance_run(self) -> int:
    return self.max_chance_run

  def __init__(self, **params: ParamValue):
    self.params = dict(params)

  @classmethod
  def validate_params(cls, params: Mapping[str, ParamValue]) -> None:
    """Raises ValueError if a parameter value is out of range."""
    del params

  # Static facts (may depend on params).
  @property
  @abc.abstractmethod
  def num_players(self) -> int:
    """Number of players (1 for single-player games)."""

  @property
  @abc.abstractmethod
  def num_actions(self) -> int:
    """Size of the player action space."""

  @property
  @abc.abstractmethod
  def num_chance_outcomes(self) -> int:
    """Size of the chance outcome space (>= 1; 1 for deterministic games)."""

  @property
  @abc.abstractmethod
  def observation_shape(self) -> Tuple[int, ...]:
    """Shape of one observation."""

  @property
  @abc.abstractmethod
  def max_game_length(self) -> int:
    """Bound on transitions (chance included); the game is truncated there."""

  @property
  def max_legal_actions(self) -> int:
    """A bound on the legal actions at any decision node (default
    `num_actions`). Players that branch on the legal moves only (the UCT
    bot, the expectimax of `envs.OnePlyPolicy`) keep this many slots instead
    of `num_actions`; `envs.testing.check_playouts` checks the bound."""
    return self.num_actions

  @property
  def max_chance_outcomes(self) -> int:
    """A bound on the outcomes of positive probability at any chance node
    after the game's first decision (default `num_chance_outcomes`). The
    chance nodes before it may have more (Nannon's opening throw, EinStein's
    layout draws): the real-game lookahead (`anakin_mz.core.lookahead`)
    expands only nodes reached by a move and keeps this many chance slots
    instead of `num_chance_outcomes`; `envs.testing.check_playouts` checks
    the bound."""
    return self.num_chance_outcomes

  # Rules.
  @abc.abstractmethod
  def init(self, key: jax.Array) -> GameState:
    """Returns the initial game state (may be a chance node)."""

  @abc.abstractmethod
  def current_player(self, g: GameState) -> jax.Array:
    """int32 `[]`: player index, `CHANCE` or `TERMINAL`."""

  @abc.abstractmethod
  def legal_action_mask(self, g: GameState) -> jax.Array:
    """bool `[num_actions]`; only read at decision nodes."""

  @abc.abstractmethod
  def chance_probs(self, g: GameState) -> jax.Array:
    """float32 `[num_chance_outcomes]`; only read at chance nodes."""

  @abc.abstractmethod
  def apply_action(self, g: GameState, action: jax.Array) -> Tuple[GameState, jax.Array]:
    """Applies a legal player action. Returns (g', rewards `[num_players]`)."""

  @abc.abstractmethod
  def apply_chance(self, g: GameState, outcome: jax.Array) -> Tuple[GameState, jax.Array]:
    """Applies a possible chance outcome. Returns (g', rewards)."""

  @abc.abstractmethod
  def observe(self, g: GameState, player: jax.Array) -> jax.Array:
    """float32 `observation_shape`, from `player`'s point of view."""

  @abc.abstractmethod
  def render(self, g: GameState) -> str:
    """A readable board (Python side, concrete state)."""

  def perspective(self, g: GameState) -> jax.Array:
    """Whose point of view `State.observation` takes at non-decision nodes."""
    return jnp.maximum(self.current_player(g), 0).astype(jnp.int32)

  def action_to_string(self, g: GameState, action: int) -> str:
    """Human-readable name of `action` (Python side)."""
    del g
    return str(action)


class Env:
  """A game behind the common jittable API. Build one with `envs.make`.

  All methods except `render`, `check_action` and `checked_step` are pure and
  jittable, and work under `jax.vmap` on batched states.
  """

  # True where chance hides inside the game's keyed transition (the gymnax
  # and pgx adapters, `envs/adapters/`): no chance nodes, `step(state,
  # action, key)` draws it, `sample_chance` raises.
  hidden_chance: bool = False

  def __init__(self, game: Game):
    self._game = game

  # Static facts.
  @property
  def game(self) -> Game:
    """The game core."""
    return self._game

  @property
  def id(self) -> str:
    """Registry name."""
    return self._game.name

  @property
  def version(self) -> int:
    """Rules/encoding version, stored in checkpoints."""
    return self._game.version

  @property
  def params(self) -> Mapping[str, ParamValue]:
    """The full parameter set (defaults filled in)."""
    return dict(self._game.params)

  @property
  def payoff(self) -> str:
    """ "single", "zero_sum" or "collaborative"."""
    return self._game.payoff

  @property
  def num_players(self) -> int:
    return self._game.num_players

  @property
  def num_actions(self) -> int:
    return self._game.num_actions

  @property
  def max_legal_actions(self) -> int:
    return self._game.max_legal_actions

  @property
  def num_chance_outcomes(self) -> int:
    return self._game.num_chance_outcomes

  @property
  def max_chance_outcomes(self) -> int:
    return self._game.max_chance_outcomes

  @property
  def observation_shape(self) -> Tuple[int, ...]:
    return tuple(self._game.observation_shape)

  @property
  def max_game_length(self) -> int:
    return self._game.max_game_length

  @property
  def chance_run(self) -> int:
    """The longest run of chance nodes the game's bounds allow after a
    transition or a reset (`Game.max_chance_run`, `max_initial_chance_run`):
    `sample_chance` and self-play unroll this many (a longer run, where the
    rules allow one, is still played exactly)."""
    return int(max(self._game.max_chance_run, self._game.max_initial_chance_run))

  def __repr__(self) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.params.items()))
    return f"envs.make({self.id!r}{', ' if args else ''}{args})"

  # Transitions.
  def init(self, key: jax.Array) -> State:
    """Initial state for PRNG `key`; it may be a chance node.

    Returns a `State` (unbatched; `jax.vmap(env.init)(keys)` for a batch: a
    batch of keys given here is a ValueError).
    """
    g = self._game.init(single_key(key, "init", self.id))
    return self._make_state(
      g,
      rewards=jnp.zeros((self.num_players,), jnp.float32),
      step_count=jnp.int32(0),
      illegal=jnp.bool_(False),
    )

  def reset(self, key: jax.Array) -> State:
    """`init`, then samples chance until a decision or terminal node."""
    # init gets split(key)[0], as it always has (the adapters' resets match
    # their library's for that key); the chance run draws from the other.
    k_init, k_chance = jax.random.split(single_key(key, "reset", self.id))
    unroll = self._game.max_initial_chance_run
    g, rewards, step_count = self._sample_game_chance(
      self._game.init(k_init),
      jnp.int32(0),
      key_words(k_chance, 2 + unroll),
      jnp.bool_(True),
      unroll,
    )
    return self._make_state(
      g, rewards, step_count, illegal=jnp.bool_(False), truncated=step_count >= self.max_game_length
    )

  def step(self, state: State, action: jax.Array, key: Optional[jax.Array] = None) -> State:
    """Applies one transition, then with `key` samples the chance that follows.

    Args:
      state: the current state.
      action: int `[]`. A player action at a decision node; a chance outcome
        index at a chance node.
      key: optional PRNG key. When given, chance nodes reached after `action`
        are sampled from `chance_probs` until a decision or terminal node,
        and `rewards` sums over all these transitions.

    Returns:
      The next `State`. Defined behaviour for every input:
      * a done state is returned unchanged with zero rewards;
      * an illegal action (masked out or out of range) at a decision node ends
        the game with `illegal_action` set: the mover gets -1; in zero-sum
        games the others share +1; in collaborative games all get -1;
      * an impossible chance outcome (probability 0 or out of range) ends the
        game with `illegal_action` set and zero rewards.

    Raises:
      ValueError: (at trace time) an action that is not one integer of shape
        `()`, or a batch of keys: `jax.vmap(env.step)` plays a batch.
    """
    if jnp.shape(action) != ():
      raise ValueError(
        f"{self.id}: env.step takes one action, an integer of shape (), got an action of "
        f"shape {jnp.shape(action)}; for a batch of games use jax.vmap(env.step)"
      )
    action = jnp.asarray(action, jnp.int32)
    g, rewards, illegal = self._apply(state, action)
    step_count = state.step_count + 1
    if key is not None:
      # The chance nodes that follow run on the game state alone: the State
      # (mask, observation, ...) is built once, for the node where they stop.
      unroll = self._game.max_chance_run
      g, chance_rewards, step_count = self._sample_game_chance(
        g, step_count, key_words(single_key(key, "step", self.id), 2 + unroll), ~illegal, unroll
      )
      rewards = rewards + chance_rewards
    return self._finish(state, g, rewards, step_count, illegal)

  def sample_chance(self, state: State, key: jax.Array) -> State:
    """Samples chance outcomes with `key` until a decision or terminal node.

    `rewards` of the result is the sum over the sampled transitions (zeros if
    `state` is not a chance node).
    """
    g, rewards, step_count = self._sample_game_chance(
      state.game,
      state.step_count,
      key_words(single_key(key, "sample_chance", self.id), 2 + self.chance_run),
      ~state.done,
      self.chance_run,
    )
    sampled = self._finish(state, g, rewards, step_count, jnp.bool_(False))
    ran = step_count != state.step_count
    kept = state.replace(rewards=jnp.zeros_like(state.rewards))
    return jax.tree.map(lambda n, o: jnp.where(ran, n, o), sampled, kept)

  def observe(self, state: State, player: jax.Array) -> jax.Array:
    """float32 `observation_shape`: the observation from `player`'s view."""
    return self._game.observe(state.game, jnp.asarray(player, jnp.int32))

  # Python-side helpers.
  def check_action(self, state: State, action: int) -> None:
    """Raises ValueError if `action` is not legal in the (unbatched) `state`.

    For Python callers; inside jit, see `step` for the defined behaviour.
    """
    if jnp.ndim(state.current_player) != 0:
      raise ValueError(
        "check_action takes one unbatched state; got "
        f"current_player of shape {jnp.shape(state.current_player)}"
      )
    player = int(state.current_player)
    try:
      a = int(action)
    except (TypeError, ValueError):
      raise ValueError(f"action must be an integer, got {action!r}") from None
    if player == TERMINAL:
      raise ValueError(f"{self.id}: the game is over; no action is legal")
    if player == CHANCE:
      probs = jax.device_get(state.chance_probs)
      possible = [i for i, p in enumerate(probs) if p > 0]
      if not 0 <= a < self.num_chance_outcomes or probs[a] <= 0:
        raise ValueError(
          f"{self.id}: chance outcome {a} is impossible at this chance node; "
          f"possible outcomes: {possible}"
        )
      return
    mask = jax.device_get(state.legal_action_mask)
    legal = [i for i, m in enumerate(mask) if m]
    if not 0 <= a < self.num_actions or not mask[a]:
      names = ", ".join(f"{i} ({self._game.action_to_string(state.game, i)})" for i in legal)
      raise ValueError(
        f"{self.id}: action {a} is illegal for player {player}; legal actions: {names}"
      )

  def checked_step(self, state: State, action: int, key: Optional[jax.Array] = None) -> State:
    """`check_action` then `step`: the safe entry point for Python callers."""
    self.check_action(state, action)
    return self.step(state, action, key)

  def render(self, state: State) -> str:
    """A readable board for one unbatched state."""
    if jnp.ndim(state.current_player) != 0:
      raise ValueError("render takes one unbatched state")
    text = self._game.render(jax.device_get(state.game))
    if bool(state.illegal_action):
      text += "\n(game ended by an illegal action)"
    elif bool(state.truncated):
      text += "\n(game truncated at max_game_length)"
    return text

  # Internals.
  def _make_state(
    self,
    g: GameState,
    rewards: jax.Array,
    step_count: jax.Array,
    illegal: jax.Array,
    truncated: Optional[jax.Array] = None,
  ) -> State:
    game = self._game
    player = game.current_player(g).astype(jnp.int32)
    terminated = player == TERMINAL
    if truncated is None:
      truncated = jnp.bool_(False)
    truncated = truncated & ~terminated
    player = jnp.where(truncated, TERMINAL, player)
    decision = player >= 0
    view = jnp.where(decision, player, game.perspective(g)).astype(jnp.int32)
    player, view = materialize((player, view))
    mask = game.legal_action_mask(g) & decision
    probs = jnp.where(player == CHANCE, game.chance_probs(g), 0.0)
    return State(
      current_player=player,
      legal_action_mask=mask.astype(jnp.bool_),
      chance_probs=probs.astype(jnp.float32),
      observation=game.observe(g, view).astype(jnp.float32),
      rewards=rewards.astype(jnp.float32),
      terminated=terminated | illegal,
      truncated=truncated,
      step_count=step_count,
      illegal_action=illegal,
      game=g,
    )

  def _illegal_rewards(self, mover: jax.Array) -> jax.Array:
    n = self.num_players
    mine = jax.nn.one_hot(mover, n, dtype=jnp.float32)
    if self.payoff == "zero_sum":
      return (1.0 - mine) / max(n - 1, 1) - mine
    if self.payoff == "collaborative":
      return -jnp.ones((n,), jnp.float32)
    return -mine

  def _step(self, state: State, action: jax.Array) -> State:
    """One explicit transition (`step` without a key)."""
    g, rewards, illegal = self._apply(state, action)
    return self._finish(state, g, rewards, state.step_count + 1, illegal)

  def _apply(self, state: State, action: jax.Array):
    """The game part of a transition: (g', rewards, illegal). An illegal
    action or impossible outcome keeps the old game state."""
    game = self._game
    player = state.current_player
    is_chance = player == CHANCE
    in_actions = (action >= 0) & (action < self.num_actions)
    in_outcomes = (action >= 0) & (action < self.num_chance_outcomes)
    legal_move = in_actions & state.legal_action_mask[jnp.clip(action, 0, self.num_actions - 1)]
    possible = in_outcomes & (
      state.chance_probs[jnp.clip(action, 0, self.num_chance_outcomes - 1)] > 0
    )
    ok = jnp.where(is_chance, possible, legal_move)

    safe_action = jnp.clip(action, 0, self.num_actions - 1)
    safe_outcome = jnp.clip(action, 0, self.num_chance_outcomes - 1)
    if game.max_chance_run == 0 and game.max_initial_chance_run == 0 and game.chance_run_exact:
      # Chance never acts: no chance branch (under vmap a `cond` runs both).
      g_next, rewards = game.apply_action(state.game, safe_action)
    else:
      g_next, rewards = jax.lax.cond(
        is_chance,
        lambda: game.apply_chance(state.game, safe_outcome),
        lambda: game.apply_action(state.game, safe_action),
      )
    rewards = rewards.astype(jnp.float32)

    illegal = materialize(~ok)  # selects every leaf of the game state
    penalty = jnp.where(
      is_chance, jnp.zeros((self.num_players,)), self._illegal_rewards(jnp.maximum(player, 0))
    )
    rewards = jnp.where(illegal, penalty, rewards)
    g_next = jax.tree.map(lambda new, old: jnp.where(illegal, old, new), g_next, state.game)
    return g_next, rewards, illegal

  def _finish(
    self, state: State, g: GameState, rewards: jax.Array, step_count: jax.Array, illegal: jax.Array
  ) -> State:
    """The `State` after a transition from `state` to game state `g`: the
    illegal-action ending and the absorbing done state, as selects (no
    control flow, so vmap computes nothing twice).

    With `Game.materialize_state`, a done `state` is kept by selecting its
    game state, flags and step count before the `State` is built (every other
    field is a function of those, built by `_make_state` as when `state` was
    made), and the selected scalars are materialized: the old mask and
    observation are not read. Otherwise the built `State` is selected field
    by field, which is cheaper where the mask and observation are cheap."""
    done = state.done
    if self._game.materialize_state:
      keep = lambda old, new: jnp.where(done, old, new)  # noqa: E731
      g = jax.tree.map(keep, state.game, g)
      illegal = keep(state.illegal_action, illegal)
      step_count = keep(state.step_count, step_count)
      rewards = keep(jnp.zeros_like(rewards), rewards)
      # The game's scalars and the flags feed every element of the mask and
      # the observation: compute them once per game (see `materialize`).
      g, illegal, step_count = materialize_small((g, illegal, step_count))
      return self._ended(g, rewards, step_count, illegal)
    new_state = self._ended(g, rewards, step_count, illegal)
    done_state = state.replace(rewards=jnp.zeros_like(state.rewards))
    return jax.tree.map(lambda d, n: jnp.where(done, d, n), done_state, new_state)

  def _ended(
    self, g: GameState, rewards: jax.Array, step_count: jax.Array, illegal: jax.Array
  ) -> State:
    """`_make_state` with truncation at `max_game_length` and the
    illegal-action ending (the old board kept, the game over)."""
    new_state = self._make_state(
      g, rewards, step_count, illegal, truncated=step_count >= self.max_game_length
    )
    return new_state.replace(
      current_player=jnp.where(illegal, TERMINAL, new_state.current_player),
      legal_action_mask=new_state.legal_action_mask & ~illegal,
      chance_probs=jnp.where(illegal, 0.0, new_state.chance_probs),
      truncated=new_state.truncated & ~illegal,
    )

  def _sample_game_chance(
    self,
    g: GameState,
    step_count: jax.Array,
    words: jax.Array,
    active: jax.Array,
    unroll: int,
  ):
    """Samples the chance nodes that follow game state `g` (if `active`).

    Each outcome is drawn by inverse CDF from one uniform, so it is always
    possible. The first `unroll` nodes are unrolled as selects
    (pgx style: no loop under vmap); a `while_loop` samples any longer run,
    and is left out where the game declares the bound exact. A run stops at
    a decision or terminal node or at `max_game_length` transitions.

    `words`: uint32 `[2 + unroll]` from `key_words`: a key for the rare
    rest (folded with the node index), then one word per unrolled node (its
    uniform, `open_uniforms`). Separate words, so that no hash feeds both.

    Returns (g', float32 `[num_players]` summed rewards, step_count').
    """
    game = self._game
    limit = self.max_game_length
    total = jnp.zeros((self.num_players,), jnp.float32)

    def chance_step(g, step_count, total, u, active):
      active = active & (game.current_player(g) == CHANCE) & (step_count < limit)
      outcome = _inverse_cdf(game.chance_probs(g), u)
      g_new, r = game.apply_chance(g, outcome)
      g = jax.tree.map(lambda n, o: jnp.where(active, n, o), g_new, g)
      total = total + jnp.where(active, r.astype(jnp.float32), 0.0)
      return g, step_count + active.astype(step_count.dtype), total, active

    rest_key, us = words[:2], open_uniforms(words[2:])
    if unroll:
      for i in range(unroll):
        g, step_count, total, active = chance_step(g, step_count, total, us[i], active)
    if not game.chance_run_exact:

      def cond(carry):
        g, step_count, _, active, _ = carry
        return active & (game.current_player(g) == CHANCE) & (step_count < limit)

      def body(carry):
        g, step_count, total, active, i = carry
        u = 1.0 - jax.random.uniform(jax.random.fold_in(rest_key, i))
        g, step_count, total, active = chance_step(g, step_count, total, u, active)
        return g, step_count, total, active, i + 1

      g, step_count, total, _, _ = jax.lax.while_loop(
        cond, body, (g, step_count, total, active, jnp.int32(unroll))
      )
    return g, total, step_count


def _inverse_cdf(probs: jax.Array, u: jax.Array) -> jax.Array:
  """int32 `[...]`: for probabilities `[..., C]` and uniforms `u` `[...]` in
  (0, 1], the outcome whose CDF interval holds `u`; never one of probability
  0. No `jnp.cumsum`: XLA lowers it on CPU to a reduce_window, quadratic in
  the number of outcomes."""
  n = probs.shape[-1]
  if n <= 32:
    cdf = probs @ jnp.triu(jnp.ones((n, n), probs.dtype))
  else:
    cdf = jax.lax.associative_scan(jnp.add, probs, axis=-1)
  x = u[..., None] * cdf[..., -1:]
  return jnp.minimum(jnp.sum(cdf < x, axis=-1), n - 1).astype(jnp.int32)
