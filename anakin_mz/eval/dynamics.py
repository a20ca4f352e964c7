"""How well the learned model knows the game: the NDMZ paper's dynamics tests
(section 4.3) and more, on games played with uniformly random moves.

Protocol (the paper's): play `num_games` games with random moves (chance
drawn from the game's `chance_probs`). From every decision position t of
every game, run h on the observation, then the dynamics g along the K
transitions actually taken (player moves and chance outcomes, as unified
actions), and compare the model's outputs at each depth k = 0..K with the
true state s^{t+k}:

* top-move test (decision states): success unless some illegal move gets a
  strictly higher choice probability than some legal move, i.e. the legal
  moves are ranked above all illegal ones (the paper's wording). We also give
  `top1`: the single most probable move is legal.
* uniform test (decision states): success unless some illegal move gets more
  than uniform probability `1 / num_actions`.
* identity accuracy (k >= 1): argmax of the identity head equals the true
  relative identity of s^{t+k}, reported separately for true decision
  ("turn": the right relative player), chance and terminal states.
* chance calibration (chance states): total variation distance between the
  chance head's softmax and the game's true `chance_probs`.
* reward error (k >= 1): |predicted - true| reward of the transition into
  s^{t+k}, the true reward taken from the root mover's side.
* value gap (k >= 1, decision states): |the model's value at depth k - the
  network's own value f(h(o^{t+k})) of the real observation there|, both
  from the root mover's side. It isolates what the search loses by valuing
  positions through g instead of h (the successor-value loss term,
  `loss.successor_value_loss`, trains exactly this gap down).

Depths past the end of a game are not counted (the terminal state itself is,
at the depth where it is reached). Counts are reported with every rate, so a
depth with few positions is visible.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from anakin_mz.core import lookahead
from anakin_mz.core.networks import Network
from anakin_mz.core.types import Params

# Metrics per depth, in table order. Rates are in [0, 1]; tv and reward_mae
# are mean distances.
METRICS = (
  "top_move",
  "top1",
  "uniform",
  "identity_turn",
  "identity_chance",
  "identity_terminal",
  "chance_tv",
  "reward_mae",
  "value_gap",
)


@dataclasses.dataclass(frozen=True)
class Trajectories:
  """Random-play games, time-major, as numpy arrays (T+1 states per game).

  Attributes:
    observation: `[T+1, G, *obs]` observation of state t.
    player: `[T+1, G]` current_player of state t (TERMINAL once over).
    legal: `[T+1, G, A]` legal mask of state t.
    chance_probs: `[T+1, G, C]` chance probabilities of state t.
    action: `[T+1, G]` unified action taken in state t (0 once over).
    rewards: `[T+1, G, P]` rewards of the transition out of state t.
    exists: `[T+1, G]` state t is part of the game (the final terminal state
      included, the absorbing copies after it not).
  """

  observation: np.ndarray
  player: np.ndarray
  legal: np.ndarray
  chance_probs: np.ndarray
  action: np.ndarray
  rewards: np.ndarray
  exists: np.ndarray


def random_play(
  env: envs.Env, key: chex.PRNGKey, num_games: int, max_steps: Optional[int] = None
) -> Trajectories:
  """Plays `num_games` games with uniformly random legal moves, all in one
  jitted scan of `max_steps` (default `env.max_game_length`) transitions."""
  steps = int(max_steps or env.max_game_length)
  if num_games < 1:
    raise ValueError(f"num_games must be >= 1, got {num_games}")
  return _random_play(env, key, num_games, steps)


def _random_play(env, key, num_games, steps):

  @jax.jit
  def run(key):
    k0, k1 = jax.random.split(key)
    state = jax.vmap(env.init)(jax.random.split(k0, num_games))

    def body(carry, k):
      state, was_done = carry
      ka, kc = jax.random.split(k)
      chance = state.current_player == envs.CHANCE
      move = envs.random_policy(state, ka)
      outcome = envs.chance_outcome(state, kc)
      action = jnp.where(chance, outcome, move)
      unified = jnp.where(chance, env.num_actions + outcome, move)
      nxt = jax.vmap(env.step)(state, action)
      record = (
        state.observation,
        state.current_player,
        state.legal_action_mask,
        state.chance_probs,
        jnp.where(state.done, 0, unified),
        nxt.rewards,
        ~was_done,
      )
      return (nxt, state.done), record

    (last, was_done), rec = jax.lax.scan(
      body, (state, jnp.zeros((num_games,), bool)), jax.random.split(k1, steps)
    )
    final = (
      last.observation,
      last.current_player,
      last.legal_action_mask,
      last.chance_probs,
      jnp.zeros((num_games,), jnp.int32),
      jnp.zeros_like(last.rewards),
      ~was_done,
    )
    return jax.tree.map(lambda r, f: jnp.concatenate([r, f[None]]), rec, final)

  obs, player, legal, probs, action, rewards, exists = jax.device_get(run(key))
  return Trajectories(
    observation=obs,
    player=player,
    legal=legal,
    chance_probs=probs,
    action=action.astype(np.int32),
    rewards=rewards,
    exists=exists,
  )


@dataclasses.dataclass(frozen=True)
class DynamicsReport:
  """Per-depth results of `dynamics_tests`.

  Attributes:
    depth: `[K+1]` the depths 0..K.
    values: metric name -> `[K+1]` float (NaN where nothing was counted).
    counts: metric name -> `[K+1]` int, the states each value averages over.
    num_games: random-play games used.
    num_positions: decision positions the unrolls start from.
  """

  depth: np.ndarray
  values: Dict[str, np.ndarray]
  counts: Dict[str, np.ndarray]
  num_games: int
  num_positions: int

  def scalars(self, prefix: str = "dynamics/") -> Dict[str, float]:
    """Flat `{prefix + metric + '_k' + depth: value}` (NaNs left out), the
    tags training logs to TensorBoard."""
    out = {}
    for name in METRICS:
      for k, v in zip(self.depth, self.values[name]):
        if np.isfinite(v):
          out[f"{prefix}{name}_k{int(k)}"] = float(v)
    return out

  def as_dict(self) -> Dict[str, object]:
    """JSON-ready dict."""
    return {
      "num_games": self.num_games,
      "num_positions": self.num_positions,
      "depth": [int(k) for k in self.depth],
      "values": {
        k: [None if not np.isfinite(x) else float(x) for x in v] for k, v in self.values.items()
      },
      "counts": {k: [int(x) for x in v] for k, v in self.counts.items()},
    }

  def table(self) -> str:
    """A readable table: one row per depth, one column per metric."""
    head = [
      "k",
      "top-move",
      "top-1",
      "uniform",
      "id turn",
      "id chance",
      "id term",
      "chance TV",
      "reward MAE",
      "value gap",
      "decisions",
    ]
    rows = [head]
    for i, k in enumerate(self.depth):
      row = [str(int(k))]
      for name in METRICS:
        v = self.values[name][i]
        row.append("-" if not np.isfinite(v) else f"{v:.3f}")
      row.append(str(int(self.counts["top_move"][i])))
      rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(head))]
    lines = ["  ".join(x.rjust(w) for x, w in zip(r, widths)) for r in rows]
    return "\n".join(lines[:1] + ["-" * len(lines[0])] + lines[1:])


def gather_starts(traj: Trajectories, unroll_steps: int) -> Dict[str, np.ndarray]:
  """Every decision start (t, g) of `traj` with the K = `unroll_steps` actions
  taken from it and the true states at depths 0..K (see the return dict)."""
  t_len = traj.player.shape[0]
  k = unroll_steps
  pad = lambda x, fill: np.concatenate([x, np.full((k,) + x.shape[1:], fill, x.dtype)])
  player = pad(traj.player, envs.TERMINAL)
  legal = pad(traj.legal, False)
  probs = pad(traj.chance_probs, 0.0)
  action = pad(traj.action, 0)
  rewards = pad(traj.rewards, 0.0)
  exists = pad(traj.exists, False)
  ts, gs = np.nonzero(traj.exists & (traj.player >= 0))
  idx = ts[:, None] + np.arange(k + 1)[None, :]  # [N, K+1]
  g = gs[:, None]
  return {
    "observation": traj.observation[ts, gs],
    # [N, K+1, *obs] the true states' observations (clipped past the last
    # step, not a padded copy of every observation: those depths are masked)
    "observations": traj.observation[np.minimum(idx, t_len - 1), g],
    "root_player": traj.player[ts, gs],
    "actions": action[idx[:, :k], g],  # [N, K]
    "player": player[idx, g],  # [N, K+1]
    "legal": legal[idx, g],  # [N, K+1, A]
    "chance_probs": probs[idx, g],  # [N, K+1, C]
    "rewards": rewards[idx[:, :k], g],  # [N, K, P] into depth k+1
    "exists": exists[idx, g] & (idx < t_len),  # [N, K+1]
  }


def _model_outputs(
  network: Network,
  params: Params,
  observation: np.ndarray,
  actions: np.ndarray,
  observations: np.ndarray,
  batch_size: int,
) -> Dict[str, np.ndarray]:
  """network.unroll in fixed-size batches (one compilation); probabilities,
  scalar rewards and values, and the values f(h(.)) of the true
  `observations` `[N, K+1, *obs]` (each from its own mover's view), as numpy."""

  @jax.jit
  def run(params, obs, acts, real_obs):
    out = network.unroll(params, obs, acts)
    n, k1 = real_obs.shape[:2]
    real = network.root(params, real_obs.reshape((n * k1,) + real_obs.shape[2:])).value
    return {
      "policy": jax.nn.softmax(out.policy_logits, -1),
      "chance": jax.nn.softmax(out.chance_logits, -1),
      "identity": jnp.argmax(out.identity_logits, -1),
      "reward": network.to_scalar(out.reward_logits),
      "value": network.to_scalar(out.value_logits),
      "value_real": real.reshape(n, k1),
    }

  n = observation.shape[0]
  chunks = []
  for lo in range(0, n, batch_size):
    obs = observation[lo : lo + batch_size]
    acts = actions[lo : lo + batch_size]
    real_obs = observations[lo : lo + batch_size]
    size = obs.shape[0]
    if size < batch_size:
      fill = batch_size - size
      obs = np.concatenate([obs, np.repeat(obs[:1], fill, 0)])
      acts = np.concatenate([acts, np.repeat(acts[:1], fill, 0)])
      real_obs = np.concatenate([real_obs, np.repeat(real_obs[:1], fill, 0)])
    out = jax.device_get(run(params, obs, acts, real_obs))
    chunks.append({k: v[:size] for k, v in out.items()})
  return {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]}


def _mean(values: np.ndarray, mask: np.ndarray):
  """Per-depth mean of `values` [N, D] over `mask` [N, D] and the counts."""
  count = mask.sum(0)
  total = np.where(mask, values, 0.0).sum(0)
  with np.errstate(invalid="ignore", divide="ignore"):
    mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
  return mean.astype(np.float64), count.astype(np.int64)


def evaluate_unrolls(
  env: envs.Env,
  network: Network,
  params: Params,
  traj: Trajectories,
  unroll_steps: int,
  batch_size: int = 512,
) -> Dict[str, tuple]:
  """Per-position outcomes of every test: metric -> (values `[N, K+1]`,
  mask `[N, K+1]`), N decision starts in `traj`."""
  starts = gather_starts(traj, unroll_steps)
  if starts["observation"].shape[0] == 0:
    raise ValueError("random play reached no decision position")
  out = _model_outputs(
    network,
    params,
    starts["observation"],
    starts["actions"],
    starts["observations"],
    batch_size,
  )
  return score(env, starts, out)


def score(env: envs.Env, s: Dict[str, np.ndarray], out: Dict[str, np.ndarray]) -> Dict[str, tuple]:
  """Scores model outputs against the truth.

  Args:
    env: the game (num_players, num_actions).
    s: `gather_starts` output for N starts and K steps.
    out: `policy` `[N, K+1, A]` and `chance` `[N, K+1, C]` probabilities,
      `identity` `[N, K]` predicted classes, `reward` `[N, K]` scalars,
      `value` `[N, K+1]` the model's values (root mover's view) and
      `value_real` `[N, K+1]` f(h(.)) of the true observations (each from
      its own mover's view).

  Returns:
    metric -> (values `[N, K+1]`, mask `[N, K+1]` of the states counted).
  """
  n, k = s["actions"].shape
  num_players = env.num_players
  exists = s["exists"]
  decision = exists & (s["player"] >= 0)
  chance = exists & (s["player"] == envs.CHANCE)

  p = out["policy"]  # [N, K+1, A]
  legal = s["legal"]
  max_illegal = np.max(np.where(legal, -np.inf, p), -1)
  min_legal = np.min(np.where(legal, p, np.inf), -1)
  top_move = ~(max_illegal > min_legal)
  top1 = np.take_along_axis(legal, p.argmax(-1)[..., None], -1)[..., 0]
  uniform = ~(max_illegal > 1.0 / env.num_actions)

  tv = 0.5 * np.abs(out["chance"] - s["chance_probs"]).sum(-1)

  player = s["player"][:, 1:]
  target = np.where(
    player >= 0,  # [N, K], types.relative_identity
    np.mod(player - s["root_player"][:, None], num_players),
    np.where(player == envs.CHANCE, num_players, num_players + 1),
  )
  correct = out["identity"] == target
  first = np.zeros((n, 1), bool)
  with_root = lambda x: np.concatenate([first, x], 1)  # depth 0 has no identity
  ex = exists[:, 1:]
  true_reward = np.take_along_axis(s["rewards"], s["root_player"][:, None, None].repeat(k, 1), -1)[
    ..., 0
  ]
  reward_err = np.abs(out["reward"] - true_reward)

  sign = lookahead.sign(s["player"], s["root_player"][:, None], env.payoff == "zero_sum")
  real = np.asarray(sign) * out["value_real"]
  value_gap = np.abs(out["value"] - real)
  later_decision = decision & (np.arange(k + 1) >= 1)[None, :]

  zeros = np.zeros((n, 1))
  return {
    "top_move": (top_move, decision),
    "top1": (top1, decision),
    "uniform": (uniform, decision),
    "identity_turn": (with_root(correct), with_root(ex & (target < num_players))),
    "identity_chance": (with_root(correct), with_root(ex & (target == num_players))),
    "identity_terminal": (with_root(correct), with_root(ex & (target == num_players + 1))),
    "chance_tv": (tv, chance),
    "reward_mae": (np.concatenate([zeros, reward_err], 1), with_root(ex)),
    "value_gap": (value_gap, later_decision),
  }


def dynamics_tests(
  env: envs.Env,
  network: Network,
  params: Params,
  key: chex.PRNGKey,
  *,
  num_games: int = 500,
  unroll_steps: int = 6,
  max_steps: Optional[int] = None,
  batch_size: int = 512,
) -> DynamicsReport:
  """Runs every test of the module docstring on `num_games` random-play
  games, unrolling `unroll_steps` (K) dynamics steps from each decision."""
  if unroll_steps < 0:
    raise ValueError(f"unroll_steps must be >= 0, got {unroll_steps}")
  traj = random_play(env, key, num_games, max_steps)
  results = evaluate_unrolls(env, network, params, traj, unroll_steps, batch_size)
  values, counts = {}, {}
  for name in METRICS:
    v, m = results[name]
    values[name], counts[name] = _mean(np.asarray(v, np.float64), m)
  n = int(np.sum(traj.exists & (traj.player >= 0)))
  return DynamicsReport(
    depth=np.arange(unroll_steps + 1),
    values=values,
    counts=counts,
    num_games=num_games,
    num_positions=n,
  )


def learner_hook(
  learner, params, key: Optional[chex.PRNGKey] = None, num_games: int = 500
) -> Dict[str, float]:
  """For the training loop (`periodic.evaluate`): the dynamics tests of
  `learner`'s network as TensorBoard scalars `dynamics/<metric>_k<k>`."""
  if key is None:
    key = jax.random.PRNGKey(learner.config.seed + 4242)
  report = dynamics_tests(
    learner.env,
    learner.network,
    params,
    key,
    num_games=num_games,
    unroll_steps=learner.config.train.unroll_steps,
  )
  return report.scalars()
