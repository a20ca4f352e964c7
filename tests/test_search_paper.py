"""Tests of the NDMZ paper's tree (`SearchConfig.tree="paper"`,
anakin_mz/core/search/paper.py): its three mechanics on hand-built table models
with hand-derived numbers (the identity drawn again at every visit, a backup
only from choice and terminal leaves, rewards ignored), and a plain-Python
transcription of the paper's Appendix A pseudocode (`_reference`) on random
models.

The table models are those of test_search.py (`search_tables`): a node's
embedding is its row, `next[row, unified_action]` the row reached.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from search_tables import NEG, set_identity, softmax, table_recurrent, table_root, tables

from anakin_mz.core.search import SearchConfig, ndmz_search

CHOICE, CHANCE, TERMINAL, IDENTITY = 0, 1, 2, 3


def _root(params, rows):
  return table_root(params, rows)


@functools.partial(jax.jit, static_argnames=("num_players", "payoff", "config"))
def _run(params, key, rows, legal, *, num_players, payoff, config):
  return ndmz_search(
    params,
    key,
    _root(params, rows),
    table_recurrent,
    legal,
    num_players=num_players,
    payoff=payoff,
    config=config,
  )


def _jnp(t, num_rows=40):
  """Device tables, padded to `num_rows` rows (one compile per shape)."""
  pad = lambda x: jnp.asarray(np.pad(x, [(0, num_rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1)))
  return jax.tree.map(pad, t)


# Deterministic rules: the identity's argmax, the chance rule
# prior - visits / (1 + sum visits), no root noise.
_EXACT = SearchConfig(
  num_simulations=8,
  dirichlet_fraction=0.0,
  identity_mode="argmax",
  chance_mode="prior_minus_visits",
  tree="paper",
)


# ----------------------------------------------------------------------------
# Settings.


def test_tree_setting_is_checked():
  assert SearchConfig().tree == "ndmz"
  with pytest.raises(ValueError, match=r"tree must be one of \('ndmz', 'paper'\), got 'mcts'"):
    SearchConfig(tree="mcts")
  with pytest.raises(ValueError, match="tree 'paper' runs with root 'puct' only"):
    SearchConfig(tree="paper", root="gumbel", max_num_considered_actions=4)
  with pytest.raises(ValueError, match="tree 'paper' has no depth limit"):
    SearchConfig(tree="paper", max_depth=5)
  assert hash(SearchConfig(tree="paper")) == hash(SearchConfig(tree="paper"))
  # The expectimax grows no tree: it plays on a config whose self-play grows
  # the paper's, whatever that tree's own settings.
  play = SearchConfig(tree="paper", root="expectimax", final_move="q", max_depth=5)
  assert (play.tree, play.root) == ("paper", "expectimax")


# ----------------------------------------------------------------------------
# Hand-built trees.


def _chance_chain_tables():
  """Two players, A = 2, C = 2. Root R (row 1, value 0.1): a0 -> X (row 2),
  a chance node (value 0.3, outcome probs [0.7, 0.3]); a1 -> row 3, a
  terminal node (value 0.9). X's outcome 0 -> Y0 (row 4), the opponent's
  choice node (value -0.2, priors [0.6, 0.4]); outcome 1 -> Y1 (row 5), the
  root mover's choice node (value 0.4). Below them row 0, terminal. Every
  transition brings a large reward, which the paper's tree must ignore."""
  t = tables(8, 2, 2, 2)
  t["value"][1:6] = [0.1, 0.3, 0.9, -0.2, 0.4]
  t["reward"][:] = [11.0, 0.0, 5.0, 1.0, 7.0, 3.0, 0.0, 0.0]
  t["next"][1, :2] = [2, 3]
  t["next"][2, 2:] = [4, 5]
  set_identity(t, 2, 2)
  t["chance"][2] = np.log([0.7, 0.3])
  set_identity(t, 3, 3)
  set_identity(t, 4, 1)
  t["policy"][4] = np.log([0.6, 0.4])
  set_identity(t, 5, 0)
  return t


# By hand, root legal move a0 only (node numbers are the simulations that made
# them; "I" an identity node):
#   1. R -a0-> I_X (model: row 2)                         no backup
#   2. I_X -> argmax: chance -> chance node 2             no backup
#   3. chance 2: scores [.7, .3] -> o0 -> I_Y0 (row 4)    no backup
#   4. chance 2: no visit counted yet: o0 again -> I_Y0 -> player 1: choice
#      node 4, value V(I_Y0) = -0.2: backs up -0.2.  Root: N(a0) = 1,
#      V = (0.1 - 0.2) / 2 = -0.05.
#   5. chance 2: [.7 - 1/2, .3] -> o1 -> I_Y1 (row 5)     no backup
#   6. o1 again -> player 0: choice node 6, value 0.4: backs up 0.4.
#      N(a0) = 2, Q = 0.1, V = (0.1 - 0.2 + 0.4) / 3 = 0.1.
#   7. chance 2: [.7 - 1/3, .3 - 1/3] -> o0 -> choice node 4 (N = 1): PUCT,
#      no child visited: prior 0.6 -> a0 -> I_Z (row 0)   no backup
#   8. I_Z -> terminal node 8, never expanded: backs up the value of the
#      closest choice node above it, node 4's -0.2.  N(a0) = 3, Q = 0,
#      V = (0.1 - 0.2 + 0.4 - 0.2) / 4 = 0.025.
# The rewards (5 into X, 7 into Y0, 11 into row 0) never enter.
_CHAIN = [  # simulations, N(a0), Q(a0), root value
  (3, 0, 0.0, 0.1),
  (4, 1, -0.2, -0.05),
  (6, 2, 0.1, 0.1),
  (8, 3, 0.0, 0.025),
]


# The searches: nothing backed up yet (3), and the whole chain (8); the
# steps between are checked on the reference below.
@pytest.mark.parametrize("sims,visits,q,root_value", [_CHAIN[0], _CHAIN[-1]])
def test_backup_only_from_choice_and_terminal_leaves(sims, visits, q, root_value):
  config = dataclasses.replace(_EXACT, num_simulations=sims)
  legal = jnp.array([[True, False]] * 2)
  out = _run(
    _jnp(_chance_chain_tables()),
    jax.random.PRNGKey(0),
    jnp.array([1, 1]),
    legal,
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  tree = out.search_tree
  np.testing.assert_array_equal(tree.children_visits[:, 0, :2], [[visits, 0]] * 2)
  np.testing.assert_allclose(tree.qvalues(jnp.zeros(2, jnp.int32))[:, 0], q, atol=1e-6)
  np.testing.assert_allclose(out.root_value, root_value, atol=1e-6)
  kinds = [CHOICE, IDENTITY, CHANCE, IDENTITY, CHOICE, IDENTITY, CHOICE, IDENTITY, TERMINAL]
  np.testing.assert_array_equal(tree.embeddings.kind[:, : sims + 1], [kinds[: sims + 1]] * 2)
  np.testing.assert_array_equal(tree.parents[0], [-1, 0, 1, 2, 3, 2, 5, 4, 7][: sims + 1])
  np.testing.assert_array_equal(tree.children_rewards, 0.0)
  # No visit before a backup: the root's move is drawn from the legal ones.
  np.testing.assert_allclose(out.action_weights, [[1.0, 0.0]] * 2)
  if sims == 8:
    # The opponent's choice node 4: one visit of its own, one of a0 below.
    np.testing.assert_array_equal(tree.embeddings.player[0, [4, 6]], [1, 0])
    np.testing.assert_array_equal(tree.node_visits[0, 4], 2)
    np.testing.assert_array_equal(tree.children_visits[0, 4, :2], [1, 0])
    np.testing.assert_allclose(tree.node_values[0, [4, 6, 8]], [-0.2, 0.4, -0.2], atol=1e-6)


def test_a_terminal_leaf_backs_up_the_closest_choice_value_and_stops_there():
  """Root move a1 leads to a terminal state (reward 1, value 0.9, both
  ignored). 1: I (row 3), no backup; 2: terminal node, the root's value 0.1
  backs up; 3: the walk stops at the terminal node, 0.1 again, and no node is
  made (node 3 stays empty)."""
  config = dataclasses.replace(_EXACT, num_simulations=3)
  out = _run(  # (the shapes of the chain's 3-simulation search: one compile)
    _jnp(_chance_chain_tables()),
    jax.random.PRNGKey(0),
    jnp.array([1, 1]),
    jnp.array([[False, True]] * 2),
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  tree = out.search_tree
  np.testing.assert_array_equal(tree.children_visits[:, 0, :2], [[0, 2]] * 2)
  np.testing.assert_allclose(tree.qvalues(jnp.zeros(2, jnp.int32))[:, 1], 0.1, atol=1e-6)
  np.testing.assert_allclose(out.root_value, [0.1] * 2, atol=1e-6)
  np.testing.assert_array_equal(tree.embeddings.kind[:, :3], [[CHOICE, IDENTITY, TERMINAL]] * 2)
  np.testing.assert_array_equal(tree.parents, [[-1, 0, 1, -1]] * 2)
  np.testing.assert_array_equal(tree.node_visits[:, 2], 2)
  np.testing.assert_array_equal(out.action, [1, 1])


def test_rewards_are_ignored():
  """The same random models with and without rewards: the paper's trees are
  identical, the default tree's are not."""
  rng = np.random.default_rng(5)
  t = _random_tables(rng, 40, 3, 4, 2)
  no_reward = dict(t, reward=np.zeros_like(t["reward"]))
  rows, legal = jnp.array([1, 2, 3]), jnp.ones((3, 3), bool)
  run = functools.partial(
    _run, key=jax.random.PRNGKey(0), rows=rows, legal=legal, num_players=2, payoff="zero_sum"
  )
  config = dataclasses.replace(_EXACT, num_simulations=30, identity_mode="sample")
  with_r, without_r = run(_jnp(t), config=config), run(_jnp(no_reward), config=config)
  jax.tree.map(np.testing.assert_array_equal, with_r, without_r)
  ours = dataclasses.replace(config, tree="ndmz")
  assert not np.allclose(
    run(_jnp(t), config=ours).root_value, run(_jnp(no_reward), config=ours).root_value
  )


def _redraw_tables():
  """Root R (row 1, value -0.25) has one move, to X (row 2, value 0.5),
  whose identity head says: the root mover's choice 1/2, terminal 1/2. X's
  moves lead to row 0 (terminal). The reward into X (3) is ignored."""
  t = tables(3, 2, 2, 2)
  t["value"][1:3] = [-0.25, 0.5]
  t["reward"][2] = 3.0
  t["next"][1, 0] = 2
  t["identity"][2] = [math.log(0.5), NEG, NEG, math.log(0.5)]
  return t


_REDRAW_LANES, _REDRAW_SIMS = 64, 30


def test_identity_is_drawn_again_at_every_visit():
  """Every simulation after the first passes X's identity node and draws its
  class anew, so X grows a choice node and a terminal node side by side.
  Given the draws (read off the tree) every number is exact: the terminal
  node backs up R's value -0.25 per draw, the choice side X's value 0.5 per
  backup, and the simulations that back nothing up are the ones that made
  identity nodes. The draws themselves are half and half."""
  config = dataclasses.replace(
    _EXACT, num_simulations=_REDRAW_SIMS, identity_mode="sample", chance_mode="sample"
  )
  out = _run(
    _jnp(_redraw_tables()),
    jax.random.PRNGKey(1),
    jnp.ones(_REDRAW_LANES, jnp.int32),
    jnp.array([[True, False]] * _REDRAW_LANES),
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  tree = jax.tree.map(np.asarray, out.search_tree)
  lanes = np.arange(_REDRAW_LANES)
  x = tree.children_index[:, 0, 0]
  np.testing.assert_array_equal(x, 1)
  np.testing.assert_array_equal(tree.embeddings.kind[lanes, x], IDENTITY)
  choice, terminal = tree.children_index[:, 1, 0], tree.children_index[:, 1, 3]
  # Both classes in every lane (a lane missing one has probability 2^-28).
  assert np.all(choice > 0) and np.all(terminal > 0)
  np.testing.assert_array_equal(tree.embeddings.kind[lanes, choice], CHOICE)
  np.testing.assert_array_equal(tree.embeddings.kind[lanes, terminal], TERMINAL)
  np.testing.assert_array_equal(tree.children_index[:, 1, 1:3], -1)
  n_terminal = tree.node_visits[lanes, terminal]
  n_choice = tree.node_visits[lanes, choice]
  np.testing.assert_array_equal(tree.children_visits[:, 0, 0], n_terminal + n_choice)
  q = tree.children_values[:, 0, 0]
  expected = (-0.25 * n_terminal + 0.5 * n_choice) / (n_terminal + n_choice)
  np.testing.assert_allclose(q, expected, atol=1e-6)
  identity_nodes = np.sum((tree.embeddings.kind == IDENTITY) & (tree.parents >= 0), axis=1)
  np.testing.assert_array_equal(_REDRAW_SIMS - tree.children_visits[:, 0, 0], identity_nodes)
  # The choice side was entered by every draw that did not go terminal; one
  # standard error of the share over 64 x 29 draws is 0.012.
  draws = _REDRAW_SIMS - 1
  assert np.all(n_terminal < draws)
  np.testing.assert_allclose(n_terminal.sum() / (draws * _REDRAW_LANES), 0.5, atol=0.05)


@pytest.mark.slow
def test_the_default_tree_draws_the_identity_once():
  """The same model in the default tree: X's kind is drawn once, so each
  lane has only one of the two below the root, about half each."""
  config = dataclasses.replace(
    _EXACT, num_simulations=_REDRAW_SIMS, identity_mode="sample", chance_mode="sample", tree="ndmz"
  )
  out = _run(
    _jnp(_redraw_tables()),
    jax.random.PRNGKey(1),
    jnp.ones(_REDRAW_LANES, jnp.int32),
    jnp.array([[True, False]] * _REDRAW_LANES),
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  kind = np.asarray(out.search_tree.embeddings.kind)[:, 1]
  assert set(np.unique(kind)) == {CHOICE, TERMINAL}
  q = np.asarray(out.search_tree.qvalues(jnp.zeros(_REDRAW_LANES, jnp.int32)))[:, 0]
  # Both add the reward into X, 3: a terminal X has value 0, a choice X
  # its value 0.5 averaged with the zeros below it.
  np.testing.assert_allclose(q[kind == TERMINAL], 3.0)
  assert np.all((q[kind == CHOICE] > 3.0) & (q[kind == CHOICE] <= 3.5))


# ----------------------------------------------------------------------------
# The Appendix A pseudocode in plain Python, on random models.


def _random_tables(rng, num_rows, num_actions, num_outcomes, num_players):
  """Random tables whose rows are choice (a random player), chance or
  terminal rows (row 0 terminal)."""
  t = tables(num_rows, num_actions, num_outcomes, num_players)
  t["next"] = rng.integers(1, num_rows, t["next"].shape).astype(np.int32)
  t["reward"] = rng.normal(size=num_rows).astype(np.float32)
  t["value"] = rng.normal(size=num_rows).astype(np.float32)
  t["policy"] = rng.normal(size=t["policy"].shape).astype(np.float32)
  t["chance"] = rng.normal(size=t["chance"].shape).astype(np.float32)
  for row in range(num_rows):
    u = rng.random()
    cls = num_players + 1 if u < 0.15 else num_players if u < 0.4 else rng.integers(num_players)
    set_identity(t, row, int(cls))
  set_identity(t, 0, num_players + 1)
  return t


class _Node:
  def __init__(self, kind, row, parent=None, edge=None, player=0, value=0.0, prior=None):
    self.kind, self.row, self.parent, self.edge = kind, row, parent, edge
    self.player, self.value, self.prior = player, float(value), prior
    self.children = {}
    self.n, self.w = 0, 0.0  # visits and total value, root mover's view


def _reference(t, root_row, legal, *, num_players, payoff, num_simulations, discount=1.0):
  """The paper's NDMZSEARCH with the deterministic rules (argmax at identity
  nodes, prior - visits share at chance nodes) and this package's PUCT at
  choice nodes. Every node keeps N and W of the backups through it (the
  paper keeps them at result nodes, which is all PUCT reads, besides the
  choice node's own N and value). Returns (root, smallest margin of an
  argmax)."""
  num_actions, num_outcomes = t["policy"].shape[1], t["chance"].shape[1]
  slots = max(num_actions, num_outcomes, num_players + 2)
  margins = []

  def pad(p):
    return np.concatenate([p, np.zeros(slots - len(p))])

  def argmax(score, valid):
    score = np.where(valid, score, -np.inf)
    top = np.sort(score[valid])[::-1]
    if len(top) > 1:
      margins.append(top[0] - top[1])
    return int(np.argmax(score))

  def q(child):  # the child's mean seen from its parent: discounted into identity nodes
    if child is None or child.n == 0:
      return 0.0
    return (discount if child.kind == "identity" else 1.0) * child.w / child.n

  def select(node):
    if node.kind == "identity":
      return argmax(node.prior, np.arange(slots) < num_players + 2)
    n = np.array([node.children[s].n if s in node.children else 0 for s in range(slots)])
    if node.kind == "chance":
      return argmax(node.prior - n / (1 + n.sum()), np.arange(slots) < num_outcomes)
    sign = -1.0 if payoff == "zero_sum" and node.player != 0 else 1.0
    qs = sign * np.array([q(node.children.get(s)) for s in range(slots)])
    v = sign * node.w / node.n
    safe = np.where(n > 0, qs, v)
    lo, hi = min(v, safe.min()), max(v, safe.max())
    value_score = (np.where(n > 0, qs, lo) - lo) / max(hi - lo, 1e-8)
    pb_c = 1.25 + math.log((node.n + 19652.0 + 1) / 19652.0)
    policy_score = math.sqrt(node.n) * pb_c * node.prior / (n + 1)
    if node.parent is None:
      valid = np.pad(legal, (0, slots - num_actions))
    else:
      valid = np.arange(slots) < num_actions
    return argmax(value_score + policy_score, valid)

  def expand(parent, slot):
    if parent.kind in ("choice", "chance"):  # EXPAND lines 55-59
      unified = slot if parent.kind == "choice" else num_actions + slot
      row = int(t["next"][parent.row, unified])
      return _Node(
        "identity", row, parent, slot, value=t["value"][row], prior=pad(t["identity"][row])
      )
    if slot < num_players:  # lines 69-73
      prior = pad(softmax(t["policy"][parent.row]))
      return _Node("choice", parent.row, parent, slot, slot, parent.value, prior)
    if slot == num_players:  # lines 62-65
      prior = pad(softmax(t["chance"][parent.row]))
      return _Node("chance", parent.row, parent, slot, value=parent.value, prior=prior)
    return _Node("terminal", parent.row, parent, slot)  # lines 66-68

  def backup(leaf):  # BACKUP: the leaf's value, or the closest choice node's
    node = leaf
    while node.kind != "choice":
      node = node.parent
    v = node.value
    node = leaf
    while node is not None:
      node.n += 1
      node.w += v
      if node.kind == "identity":
        v *= discount
      node = node.parent

  root_prior = softmax(np.where(legal, t["policy"][root_row], -np.inf))
  root = _Node("choice", root_row, value=t["value"][root_row], prior=pad(root_prior))
  root.n, root.w = 1, root.value  # the root's own value counts once, as mctx's does
  for _ in range(num_simulations):
    node = root
    while node.kind != "terminal":  # TREESELECT
      slot = select(node)
      if slot not in node.children:
        node.children[slot] = node = expand(node, slot)
        break
      node = node.children[slot]
    if node.kind in ("choice", "terminal"):
      backup(node)
  return root, (min(margins) if margins else np.inf)


def test_reference_gives_the_hand_derived_chain():
  for sims, visits, q, root_value in _CHAIN:
    root, _ = _reference(
      _chance_chain_tables(),
      1,
      np.array([True, False]),
      num_players=2,
      payoff="zero_sum",
      num_simulations=sims,
    )
    a0 = root.children.get(0)
    assert (a0.n if a0 else 0) == visits
    np.testing.assert_allclose(a0.w / a0.n if visits else 0.0, q, atol=1e-9)
    np.testing.assert_allclose(root.w / root.n, root_value, atol=1e-9)


@pytest.mark.parametrize(
  "payoff,num_players,discount",
  [
    ("zero_sum", 2, 1.0),
    pytest.param("single", 1, 1.0, marks=pytest.mark.slow),
    pytest.param("zero_sum", 2, 0.8, marks=pytest.mark.slow),
  ],
)
def test_random_models_match_the_reference(payoff, num_players, discount):
  num_actions, num_outcomes, batch, sims = 3, 4, 3, 40
  config = dataclasses.replace(_EXACT, num_simulations=sims, discount=discount)
  for seed in range(3):
    rng = np.random.default_rng(10 * seed + num_players)
    t = _random_tables(rng, 40, num_actions, num_outcomes, num_players)
    rows = rng.integers(1, 40, batch)
    legal = rng.random((batch, num_actions)) < 0.7
    legal[:, 0] = True
    out = _run(
      _jnp(t),
      jax.random.PRNGKey(seed),
      jnp.asarray(rows),
      jnp.asarray(legal),
      num_players=num_players,
      payoff=payoff,
      config=config,
    )
    tree = out.search_tree
    for b in range(batch):
      ref, margin = _reference(
        t,
        int(rows[b]),
        legal[b],
        num_players=num_players,
        payoff=payoff,
        num_simulations=sims,
        discount=discount,
      )
      assert margin > 1e-5, "near tie: the comparison would be meaningless"
      kids = [ref.children.get(a) for a in range(num_actions)]
      np.testing.assert_array_equal(
        tree.children_visits[b, 0, :num_actions], [k.n if k else 0 for k in kids]
      )
      np.testing.assert_allclose(
        tree.children_values[b, 0, :num_actions],
        [k.w / k.n if k and k.n else 0.0 for k in kids],
        rtol=1e-5,
        atol=1e-5,
      )
      np.testing.assert_allclose(out.root_value[b], ref.w / ref.n, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_nannon_trains_with_the_papers_tree_and_knobs(tmp_path):
  """A few tiny updates of Nannon with the paper's tree and model knobs."""
  import tiny

  from anakin_mz.runtime import run

  cfg = tiny.tiny_config(
    "nannon",
    "search.tree=paper",
    "search.num_simulations=6",
    "network.normalize_latent=false",
    "network.dynamics_grad_scale=1",
    "network.noop_action=true",
  )
  rows = []
  run.train(cfg, logdir=str(tmp_path), max_updates=4, progress=False, on_step=rows.append)
  assert rows and all(np.isfinite(r["loss"]) for r in rows)
