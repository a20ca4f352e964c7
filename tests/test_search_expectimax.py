"""The search without a tree (`SearchConfig(root="expectimax")`,
`anakin_mz.core.search.expectimax`): exact numbers on a hand-built table
model, a plain-Python recursion over random table models, the planning
diagnosis's `model_chance` as its depth 1, and the settings' validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from search_tables import set_identity, softmax, table_recurrent, table_root, tables

from anakin_mz import config as config_lib
from anakin_mz.core.search import SearchConfig, ndmz_search
from anakin_mz.core.search.expectimax import action_values
from anakin_mz.eval import planning


def _values(t, rows, legal, config, *, num_players=2, flip=True):
  return np.asarray(
    action_values(
      t,
      jax.random.PRNGKey(0),
      table_root(t, rows),
      table_recurrent,
      legal,
      num_players=num_players,
      flip_opponents=flip,
      config=config,
    )
  )


def _two_moves_deep():
  # Root row 1 (player 0 of 2), moves a0 and a1 (a2 illegal at the root).
  # a0 -> row 2, chance (outcomes 1/4, 3/4) -> rows 3 and 4, the opponent's
  #   decisions (values 0.9 and 0.9, never read two moves deep):
  #   row 3: b0 -> row 5 (terminal, reward -1), b1 -> row 6 (chance value
  #   0.2: outcome 0 of prob 1 -> row 7, player 0's decision valued 0.4);
  #   row 4: b0 -> row 6, b1 -> row 8 (terminal, reward 0.3), b2's prior is
  #   below the threshold (its child row 5 would be the opponent's best).
  # a1 -> row 8 (terminal, reward 0.3).
  t = tables(10, 3, 2, 2)
  set_identity(t, 1, 0)
  set_identity(t, 2, 2)
  for row in (3, 4):
    set_identity(t, row, 1)
  set_identity(t, 6, 2)
  set_identity(t, 7, 0)
  t["next"][1, :2] = [2, 8]
  t["next"][2, 3:] = [3, 4]
  t["chance"][2] = [0.0, np.log(3.0)]
  t["next"][3, :2] = [5, 6]
  t["next"][4, :3] = [6, 8, 5]
  t["policy"][3] = [0.0, 0.0, -30.0]
  t["policy"][4] = [0.0, 0.0, -30.0]
  t["next"][6, 3:] = [7, 7]
  t["chance"][6] = [0.0, -30.0]
  t["reward"][5], t["reward"][8] = -1.0, 0.3
  t["value"][3], t["value"][4], t["value"][6], t["value"][7] = 0.9, 0.9, 0.2, 0.4
  t["value"][2] = 0.5  # a0's afterstate value, read with expectimax_afterstate only
  return jax.tree.map(jnp.asarray, t)


def _config(**kw):
  return SearchConfig(root="expectimax", **kw)


def test_two_moves_deep_hand_built():
  t = _two_moves_deep()
  legal = jnp.asarray([[True, True, False]])
  rows = jnp.ones(1, jnp.int32)
  # The opponent minimises the root's view: at row 3 min(-1, 0.4) = -1, at
  # row 4 min(0.4, 0.3) = 0.3 (b2, prior ~1e-13, is left out).
  two = _values(t, rows, legal, _config(expectimax_depth=2))
  np.testing.assert_allclose(two, [[0.25 * -1.0 + 0.75 * 0.3, 0.3, -np.inf]], rtol=1e-6)
  # One move deep the opponent's decisions are their value heads.
  one = _values(t, rows, legal, _config(expectimax_depth=1))
  np.testing.assert_allclose(one, [[0.9, 0.3, -np.inf]], rtol=1e-6)
  # With no threshold b2 (reward -1) is the opponent's best at row 4.
  none = _values(t, rows, legal, _config(expectimax_depth=2, expectimax_min_prior=0.0))
  np.testing.assert_allclose(none[0, 0], 0.25 * -1.0 + 0.75 * -1.0, rtol=1e-6)
  # One outcome per chance node: row 2's likelier one (3/4, row 4) alone.
  top = _values(t, rows, legal, _config(expectimax_depth=2, expectimax_chance_width=1))
  np.testing.assert_allclose(top[0, 0], 0.3, rtol=1e-6)
  # In a collaborative game every mover maximises: 0.25 * 0.4 + 0.75 * 0.4.
  collab = _values(t, rows, legal, _config(expectimax_depth=2), flip=False)
  np.testing.assert_allclose(collab[0, 0], 0.4, rtol=1e-6)
  # Discount 0.5 on every edge: row 6 is worth 0.5 * 0.4, so the opponent
  # takes b0 at row 4 too (0.5 * 0.2 < 0.3).
  half = _values(t, rows, legal, _config(expectimax_depth=2, discount=0.5))
  a0 = 0.5 * (0.25 * (0.5 * -1.0) + 0.75 * (0.5 * (0.5 * (0.5 * 0.4))))
  np.testing.assert_allclose(half[0, :2], [a0, 0.3], rtol=1e-6)
  # Afterstates end the line: one move deep a0 is row 2's own value; two
  # moves deep the replies' afterstate row 6 is worth its value 0.2 (not
  # row 7's 0.4), so row 4's reply is min(0.2, 0.3) = 0.2.
  after = dict(expectimax_afterstate=True)
  one = _values(t, rows, legal, _config(expectimax_depth=1, **after))
  np.testing.assert_allclose(one, [[0.5, 0.3, -np.inf]], rtol=1e-6)
  two = _values(t, rows, legal, _config(expectimax_depth=2, **after))
  np.testing.assert_allclose(two[0, :2], [0.25 * -1.0 + 0.75 * 0.2, 0.3], rtol=1e-6)


def test_the_search_plays_the_best_legal_move():
  t = _two_moves_deep()
  legal = jnp.asarray([[True, True, False], [True, False, False]])
  rows = jnp.ones(2, jnp.int32)
  out = ndmz_search(
    t,
    jax.random.PRNGKey(3),
    table_root(t, rows),
    table_recurrent,
    legal,
    num_players=2,
    payoff="zero_sum",
    config=_config(expectimax_depth=2),
    temperature=1.0,
  )
  # Row 0: a0 is worth 0.25 * -1 + 0.75 * 0.3 = -0.025, below a1's 0.3.
  np.testing.assert_array_equal(np.asarray(out.action), [1, 0])
  np.testing.assert_array_equal(np.asarray(out.action_weights), [[0, 1, 0], [1, 0, 0]])
  np.testing.assert_allclose(np.asarray(out.root_value), [0.3, -0.025], rtol=1e-5)
  assert out.search_tree is None


def _random_tables(seed, num_rows=40, num_actions=3, num_outcomes=2, num_players=2):
  rng = np.random.default_rng(seed)
  t = tables(num_rows, num_actions, num_outcomes, num_players)
  # Row 0 stays the terminal sink; the others: any class, weighted to
  # choice and chance nodes.
  classes = rng.choice(num_players + 2, size=num_rows, p=[0.35, 0.35, 0.2, 0.1])
  for row in range(1, num_rows):
    set_identity(t, row, int(classes[row]))
  t["next"][:] = rng.integers(1, num_rows, size=t["next"].shape)
  t["reward"][:] = rng.uniform(-0.5, 0.5, num_rows)
  t["value"][:] = rng.uniform(-1, 1, num_rows)
  t["policy"][:] = rng.normal(0, 2.0, t["policy"].shape)
  t["chance"][:] = rng.normal(0, 1.0, t["chance"].shape)
  return t


def _reference(t, root, legal, config, num_players, flip):
  """A plain recursion of the module's rules, float64."""
  num_actions = t["policy"].shape[1]
  width = config.expectimax_width or num_actions
  term, chance_cls = num_players + 1, num_players

  def edge(row, unified, moves, chance):
    child = t["next"][row, unified]
    return t["reward"][child] + config.discount * value(child, moves, chance)

  def value(row, moves, chance):
    ident = int(np.argmax(t["identity"][row]))
    if ident == term:
      return 0.0
    if ident == chance_cls:
      if not chance or (moves == 0 and config.expectimax_afterstate):
        return float(t["value"][row])
      p = softmax(t["chance"][row])
      top = np.argsort(-p, kind="stable")[: config.expectimax_chance_width or len(p)]
      return sum(p[c] * edge(row, num_actions + c, moves, False) for c in top) / p[top].sum()
    if moves == 0:
      return float(t["value"][row])
    p = softmax(t["policy"][row])
    order = np.argsort(-p, kind="stable")[:width]
    kept = [a for i, a in enumerate(order) if i == 0 or p[a] >= config.expectimax_min_prior]
    s = -1.0 if flip and ident != 0 else 1.0
    return s * max(s * edge(row, a, moves - 1, True) for a in kept)

  logits = np.where(legal, t["policy"][root], -np.inf)
  order = np.argsort(-logits, kind="stable")[:width]
  out = np.full(num_actions, -np.inf)
  for a in order:
    if legal[a]:
      out[a] = edge(root, a, config.expectimax_depth - 1, True)
  return out


@pytest.mark.parametrize(
  "seed, depth, width, chance_width, min_prior, flip, discount, afterstate",
  [
    (0, 1, None, None, 0.01, True, 1.0, False),
    (1, 2, None, None, 0.01, True, 1.0, False),
    (2, 2, 2, None, 0.01, True, 0.9, False),
    (3, 2, 2, 1, 0.0, False, 1.0, False),
    (4, 3, 2, None, 0.05, True, 1.0, False),
    (6, 2, None, 2, 0.01, True, 1.0, False),
    (1, 2, None, None, 0.01, True, 1.0, True),
    (4, 3, 2, None, 0.05, True, 0.9, True),
  ],
)
def test_random_models_match_a_plain_recursion(
  seed, depth, width, chance_width, min_prior, flip, discount, afterstate
):
  t = _random_tables(seed)
  rows = np.array([1, 2, 3, 4, 5], np.int32)
  rng = np.random.default_rng(100 + seed)
  legal = rng.random((len(rows), 3)) < 0.7
  legal[:, 0] |= ~legal.any(axis=1)
  config = _config(
    expectimax_depth=depth,
    expectimax_width=width,
    expectimax_chance_width=chance_width,
    expectimax_min_prior=min_prior,
    discount=discount,
    expectimax_afterstate=afterstate,
  )
  got = _values(
    jax.tree.map(jnp.asarray, t), jnp.asarray(rows), jnp.asarray(legal), config, flip=flip
  )
  want = np.stack([_reference(t, r, legal[i], config, 2, flip) for i, r in enumerate(rows)])
  np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
  finite = np.isfinite(want)
  np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-6)


class _TableModel:
  def root(self, params, observation):
    return table_root(params, observation.astype(jnp.int32))

  def recurrent(self, params, rng_key, action, embedding):
    return table_recurrent(params, rng_key, action, embedding)


@pytest.mark.parametrize("discount", [1.0, 0.8])
@pytest.mark.parametrize("afterstate", [False, True])
def test_depth_one_is_the_planning_diagnosis_model_chance(discount, afterstate):
  # Without the afterstate it is model_chance (the die averaged), with it
  # model_1ply (the afterstate's own value).
  t = jax.tree.map(jnp.asarray, _random_tables(7))
  rows = jnp.arange(1, 9, dtype=jnp.int32)
  legal = jnp.ones((8, 3), bool)
  config = _config(expectimax_depth=1, discount=discount, expectimax_afterstate=afterstate)
  got = _values(t, rows, legal, config)
  want = planning.model_action_values(
    _TableModel(), t, rows, num_players=2, discount=discount, expect_chance=not afterstate
  )
  np.testing.assert_allclose(got, np.asarray(want), rtol=1e-6)
  # The two differ on these tables: the test tells them apart.
  other = _values(
    t,
    rows,
    legal,
    _config(expectimax_depth=1, discount=discount, expectimax_afterstate=not afterstate),
  )
  assert not np.allclose(got, other)


@pytest.mark.parametrize(
  "kw, match",
  [
    (dict(expectimax_width=0), "expectimax_width must be null"),
    (dict(expectimax_width=2.5), "expectimax_width must be null"),
    (dict(expectimax_chance_width=0), "expectimax_chance_width must be null"),
    (dict(expectimax_min_prior=-0.1), "expectimax_min_prior must be a finite number >= 0"),
    (dict(expectimax_min_prior=1.0), "expectimax_min_prior must be below 1"),
    (dict(root="expectimaxx"), "root must be one of"),
    (dict(expectimax_afterstate=1), "expectimax_afterstate must be true or false"),
  ],
)
def test_settings_are_checked(kw, match):
  with pytest.raises(ValueError, match=match):
    SearchConfig(**kw)


def test_the_config_takes_it_to_play_and_refuses_it_for_self_play():
  path = config_lib.shipped_path("nannon.yaml")
  config = config_lib.load(path, ["play_search.root=expectimax"])
  assert config.playing_search.root == "expectimax"
  assert config.search.root != "expectimax"
  with pytest.raises(ValueError, match="search.root 'expectimax' grows no tree"):
    config_lib.load(path, ["search.root=expectimax"])
  # Stochastic MuZero plays it too (tests/test_smz_expectimax.py).


def test_chunks_of_roots_give_the_same_values(monkeypatch):
  from anakin_mz.core.search import expectimax

  t = jax.tree.map(jnp.asarray, _random_tables(5))
  rows = jnp.asarray(np.arange(1, 12, dtype=np.int32))
  legal = jnp.asarray(np.random.default_rng(0).random((11, 3)) < 0.7).at[:, 1].set(True)
  config = _config(expectimax_depth=2, expectimax_width=2)
  kw = dict(num_players=2, flip_opponents=True, config=config)
  args = (t, jax.random.PRNGKey(0), table_root(t, rows), table_recurrent, legal)
  whole = expectimax.action_values(*args, **kw)
  # 2 * 2 * (2 * 2) = 16 leaves a root: chunks of 4 roots, the last padded.
  monkeypatch.setattr(expectimax, "LEAF_BUDGET", 64)
  chunked = expectimax.chunked_action_values(*args, **kw)
  np.testing.assert_array_equal(np.asarray(chunked), np.asarray(whole))
