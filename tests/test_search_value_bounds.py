"""search.value_bounds: PUCT's Q scaled by a fixed range instead of the
min and max of the parent and its visited children (exact numbers)."""

import types

import jax.numpy as jnp
import numpy as np
import pytest

from anakin_mz.core.search import SearchConfig
from anakin_mz.core.search.tree import _normalized_mover_q


def _tree(q, visits, node_value):
  return types.SimpleNamespace(
    qvalues=lambda i: jnp.asarray(q, jnp.float32),
    children_visits=jnp.asarray([visits]),
    node_values=jnp.asarray([node_value], jnp.float32),
  )


def test_fixed_bounds_scale_the_movers_q_by_the_range():
  tree = _tree([0.2, -0.4, 0.0], [3, 1, 0], 0.1)
  # The opponent's node (sign -1) sees [-0.2, 0.4, 0.0]; by [-1, 1]: (q + 1) / 2.
  got = _normalized_mover_q(tree, 0, -1.0, (-1.0, 1.0))
  np.testing.assert_allclose(np.asarray(got), [0.4, 0.7, 0.5], rtol=1e-6)


def test_min_max_stretches_small_differences_to_the_whole_range():
  tree = _tree([0.02, 0.01, 0.0], [3, 1, 0], 0.015)
  # Parent and siblings span [0.01, 0.02]: 0.02 -> 1, 0.01 -> 0, unvisited -> the min.
  got = _normalized_mover_q(tree, 0, 1.0)
  np.testing.assert_allclose(np.asarray(got), [1.0, 0.0, 0.0], atol=1e-5)
  fixed = _normalized_mover_q(tree, 0, 1.0, (-1.0, 1.0))
  np.testing.assert_allclose(np.asarray(fixed), [0.51, 0.505, 0.5], rtol=1e-6)


def test_value_bounds_are_checked_and_hashable():
  config = SearchConfig(value_bounds=[-1, 1])
  assert config.value_bounds == (-1.0, 1.0) and hash(config) == hash(
    SearchConfig(value_bounds=(-1, 1))
  )
  assert SearchConfig().value_bounds is None
  for bad in ([1, -1], [0, 0], [-1], [-1, float("inf")], "wide", [True, 2]):
    with pytest.raises(ValueError, match="value_bounds must be null"):
      SearchConfig(value_bounds=bad)


def test_value_bounds_go_through_the_config_and_back():
  import tiny

  from anakin_mz import config as config_lib

  config = config_lib.load(tiny.config_path("nannon"), ["search.value_bounds=[-1, 1]"])
  assert config.search.value_bounds == (-1.0, 1.0)
  assert config_lib.from_dict(config.to_dict()) == config
  with pytest.raises(ValueError, match="value_bounds must be null"):
    config_lib.load(tiny.config_path("nannon"), ["search.value_bounds=[1, -1]"])
