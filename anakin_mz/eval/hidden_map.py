"""The hidden-state map (MooZi, section 5.9): the representation network's
hidden states of real positions, embedded in 2-D with t-SNE and coloured by
the predicted value, the mover and the phase of the game.

Positions come from games played by `anakin_mz.eval.dynamics.random_play`
(uniformly random legal moves, chance from the game's own probabilities);
every decision position of those games is a candidate. Works for any game:
the hidden state is flattened, and a single-player game has one mover.
Needs scikit-learn and matplotlib (the `plot` extra).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import chex
import jax
import jax.numpy as jnp
import numpy as np

import envs
from anakin_mz.eval import dynamics
from anakin_mz.core.networks import Network
from anakin_mz.core.types import Params


@dataclasses.dataclass(frozen=True)
class HiddenStates:
  """`N` decision positions and the network's view of them.

  Attributes:
    hidden: `[N, D]` flattened hidden states h(observation).
    value: `[N]` predicted value f(h), from the mover's point of view.
    mover: `[N]` the player to move.
    phase: `[N]` in [0, 1]: the position's transition index over its game's
      length (0 at the start, 1 at the last decision).
    num_games: the games the positions were drawn from.
  """

  hidden: np.ndarray
  value: np.ndarray
  mover: np.ndarray
  phase: np.ndarray
  num_games: int


def collect_hidden_states(
  env: envs.Env,
  network: Network,
  params: Params,
  key: chex.PRNGKey,
  num_positions: int = 3000,
  num_games: int = 256,
  max_steps: int = 256,
  batch: int = 512,
) -> HiddenStates:
  """Plays `num_games` random games (at most `max_steps` transitions each)
  and returns the hidden states of up to `num_positions` of their decision
  positions, drawn uniformly without replacement."""
  if num_positions < 2:
    raise ValueError(f"num_positions must be >= 2, got {num_positions}")
  k_play, k_pick = jax.random.split(key)
  steps = min(env.max_game_length, max_steps)
  traj = dynamics.random_play(env, k_play, num_games, steps)
  decision = traj.exists & (traj.player >= 0)  # [T+1, G]
  t_idx, g_idx = np.nonzero(decision)
  if t_idx.size < 2:
    raise ValueError(f"{env.id}: random play gave {t_idx.size} decision positions; need 2")
  last = np.array([t_idx[g_idx == g].max() if np.any(g_idx == g) else 0 for g in range(num_games)])
  pick = np.asarray(jax.random.permutation(k_pick, t_idx.size))[:num_positions]
  t_idx, g_idx = t_idx[pick], g_idx[pick]
  obs = traj.observation[t_idx, g_idx]

  @jax.jit
  def look(o):
    hidden = network.represent(params, o)
    _, _, value = network.predict(params, hidden)
    return hidden.reshape(hidden.shape[0], -1), network.to_scalar(value)

  hidden, value = [], []
  for i in range(0, obs.shape[0], batch):
    chunk = obs[i : i + batch]
    pad = batch - chunk.shape[0]  # one compiled shape
    h, v = look(jnp.asarray(np.concatenate([chunk, np.repeat(chunk[:1], pad, 0)])))
    hidden.append(np.asarray(h)[: chunk.shape[0]])
    value.append(np.asarray(v)[: chunk.shape[0]])
  return HiddenStates(
    hidden=np.concatenate(hidden),
    value=np.concatenate(value),
    mover=traj.player[t_idx, g_idx].astype(np.int32),
    phase=t_idx / np.maximum(last[g_idx], 1),
    num_games=num_games,
  )


def tsne(hidden: np.ndarray, seed: int = 0, perplexity: float = 30.0) -> np.ndarray:
  """`[N, 2]`: scikit-learn's t-SNE of `[N, D]` hidden states (after a PCA
  to 50 dimensions where D is larger, the usual preprocessing)."""
  try:
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
  except ImportError:
    raise ImportError("the hidden-state map needs scikit-learn: install anakin-mz[plot]") from None
  x = np.asarray(hidden, np.float64)
  x = x - x.mean(0)
  if x.shape[1] > 50 and x.shape[0] > 50:
    x = PCA(n_components=50, random_state=seed).fit_transform(x)
  perplexity = min(perplexity, (x.shape[0] - 1) / 3.0)
  return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(x)


def plot_hidden_map(
  states: HiddenStates, embedding: np.ndarray, path: str, title: Optional[str] = None
) -> str:
  """Writes a PNG of three panels (value, mover, phase) of the `[N, 2]`
  `embedding` to `path`; returns `path`."""
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
  x, y = embedding[:, 0], embedding[:, 1]
  kw = dict(s=6, linewidths=0)
  lim = max(float(np.max(np.abs(states.value))), 1e-6)
  sc = axes[0].scatter(x, y, c=states.value, cmap="coolwarm", vmin=-lim, vmax=lim, **kw)
  fig.colorbar(sc, ax=axes[0], label="predicted value (mover's view)")
  axes[0].set_title("value")
  movers = np.unique(states.mover)
  cmap = plt.get_cmap("tab10")
  for m in movers:
    sel = states.mover == m
    axes[1].scatter(x[sel], y[sel], color=cmap(int(m) % 10), label=f"player {m}", **kw)
  axes[1].legend(markerscale=3, loc="best", fontsize="small")
  axes[1].set_title("mover")
  sc = axes[2].scatter(x, y, c=states.phase, cmap="viridis", vmin=0, vmax=1, **kw)
  fig.colorbar(sc, ax=axes[2], label="phase (transition / game length)")
  axes[2].set_title("phase")
  for ax in axes:
    ax.set_xticks([])
    ax.set_yticks([])
  fig.suptitle(
    title or f"t-SNE of {len(states.value)} hidden states from {states.num_games} random games"
  )
  fig.tight_layout()
  fig.savefig(path, dpi=80)
  plt.close(fig)
  return path


def hidden_tsne_png(
  directory: str,
  out: str,
  step: Optional[int] = None,
  num_positions: int = 3000,
  seed: int = 0,
) -> str:
  """The hidden-state map of the agent saved in checkpoint `directory`
  (latest step unless `step`) as a PNG at `out`; returns `out`. Raises
  `CheckpointError` (a ValueError) for a bad checkpoint."""
  from anakin_mz.runtime.restore import load_agent

  agent = load_agent(directory, step)
  if not agent.spec.capabilities.ndmz_network:
    raise ValueError(
      f"the hidden-state map reads an NDMZ network's representation; this checkpoint's "
      f"agent {agent.config.agent!r} has none"
    )
  states = collect_hidden_states(
    agent.env, agent.network, agent.params, jax.random.PRNGKey(seed), num_positions
  )
  embedding = tsne(states.hidden, seed)
  title = (
    f"{agent.env.id}, update {agent.step}: t-SNE of {len(states.value)} hidden states "
    f"from {states.num_games} random games"
  )
  return plot_hidden_map(states, embedding, out, title)
