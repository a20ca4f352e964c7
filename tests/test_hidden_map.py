"""The hidden-state map: positions from random games, the representation's
hidden states and values, t-SNE and the PNG, on a tiny untrained network."""

import jax
import numpy as np
import pytest

import envs
from anakin_mz.eval import hidden_map
from anakin_mz.core.networks import Network, NetworkConfig


@pytest.mark.parametrize(
  "name",
  ["nannon", pytest.param("catch", marks=pytest.mark.slow)],  # one player, one mover
)
def test_hidden_map_any_game(name, tmp_path):
  env = envs.make(name)
  network = Network(env, NetworkConfig(hidden=(16,), latent_dim=8))
  params = network.init(jax.random.PRNGKey(0))
  states = hidden_map.collect_hidden_states(
    env, network, params, jax.random.PRNGKey(1), num_positions=120, num_games=16, batch=64
  )
  n = len(states.value)
  assert 2 <= n <= 120 and states.hidden.shape == (n, 8)
  assert states.mover.shape == states.phase.shape == (n,)
  assert np.all((states.phase >= 0) & (states.phase <= 1))
  assert set(np.unique(states.mover)) <= set(range(env.num_players))
  if env.num_players == 2:
    assert set(np.unique(states.mover)) == {0, 1}  # both movers appear
  # The values are f(h(obs)) of the picked positions.
  obs = np.asarray(states.hidden[:4])
  again = np.asarray(network.predict(params, obs.reshape((4, 8)))[2])
  np.testing.assert_allclose(network.to_scalar(again), states.value[:4], rtol=1e-5, atol=1e-6)
  emb = hidden_map.tsne(states.hidden, seed=0)
  assert emb.shape == (n, 2) and np.all(np.isfinite(emb))
  path = hidden_map.plot_hidden_map(states, emb, str(tmp_path / "map.png"))
  assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
