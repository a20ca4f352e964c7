"""`envs.policy.random_legal_action`: the k-th legal action, exactly."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.policy import random_legal_action


def _reference(mask: np.ndarray, key: jax.Array) -> np.ndarray:
  """The rule in numpy: k = floor(u * count) with the same uniform, then the
  k-th True index of the row (0 for a row with none)."""
  count = mask.sum(-1)
  u = np.asarray(jax.random.uniform(key, count.shape))
  k = np.minimum(np.floor(u * count).astype(np.int64), np.maximum(count - 1, 0))
  out = np.zeros(len(mask), np.int64)
  for i, row in enumerate(mask):
    legal = np.flatnonzero(row)
    out[i] = legal[k[i]] if len(legal) else 0
  return out


# 1 word, a word boundary, Breakthrough/EinStein's 75, the unrolled limit
# (512) and past it (the running count over words).
@pytest.mark.parametrize("num_actions", [3, 32, 33, 75, 512, 600])
def test_draws_the_kth_legal_action(num_actions):
  rng = np.random.default_rng(num_actions)
  fn = jax.jit(random_legal_action)
  for i, density in enumerate((0.0, 0.02, 0.5, 1.0)):
    mask = rng.random((256, num_actions)) < density
    mask[0] = False
    mask[1] = False
    mask[1, num_actions - 1] = True  # the last action alone
    key = jax.random.PRNGKey(i)
    np.testing.assert_array_equal(fn(jnp.asarray(mask), key), _reference(mask, key))


def test_every_legal_action_is_drawn_uniformly():
  mask = np.zeros((75,), bool)
  mask[[0, 31, 32, 63, 64, 74]] = True  # the ends of each 32-bit word
  keys = jax.random.split(jax.random.PRNGKey(0), 6000)
  draws = np.asarray(jax.jit(jax.vmap(random_legal_action, (None, 0)))(jnp.asarray(mask), keys))
  counts = np.bincount(draws, minlength=75)
  assert set(np.flatnonzero(counts)) == {0, 31, 32, 63, 64, 74}
  assert counts[mask].min() > 850  # 1000 expected each; 850 is > 5 sigma away
