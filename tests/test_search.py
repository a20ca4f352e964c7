"""Tests of the NDMZ search (anakin_mz/core/search/).

The models are lookup tables passed as `params` (so one compiled search serves
many models): a node's embedding is its table row, `next[row, unified_action]`
is the row reached, and the row holds the reward into it, its value, policy,
chance and identity logits. Exact expectations come from hand derivations
(written out below) and from `_reference_search`, an independent plain-Python
implementation of the same selection rules on the same tables.
"""

import dataclasses
import functools
import math

import chex
import jax
import jax.numpy as jnp
import mctx
import numpy as np
import pytest
from search_tables import NEG, set_identity, softmax, table_recurrent, table_root, tables

from anakin_mz.core import search
from anakin_mz.core.search import puct
from anakin_mz.core.search import SearchConfig, ndmz_search
from anakin_mz.core.types import ModelOutput


# ----------------------------------------------------------------------------
# Table models.


def _table_root(params, root_rows):
  return table_root(params, root_rows)


def _random_tables(
  rng, num_rows, num_actions, num_outcomes, num_players, p_chance=0.25, p_terminal=0.15
):
  """Random tables whose rows are choice (random player), chance or terminal."""
  t = tables(num_rows, num_actions, num_outcomes, num_players)
  t["next"] = rng.integers(1, num_rows, t["next"].shape).astype(np.int32)
  t["reward"] = rng.normal(size=num_rows).astype(np.float32)
  t["value"] = rng.normal(size=num_rows).astype(np.float32)
  t["policy"] = rng.normal(size=t["policy"].shape).astype(np.float32)
  t["chance"] = rng.normal(size=t["chance"].shape).astype(np.float32)
  for row in range(num_rows):
    u = rng.random()
    if u < p_terminal:
      cls = num_players + 1
    elif u < p_terminal + p_chance:
      cls = num_players
    else:
      cls = int(rng.integers(num_players))
    set_identity(t, row, cls)
  return t


def _run_impl(params, key, root_rows, legal, temperature=1.0, *, num_players, payoff, config):
  return ndmz_search(
    params,
    key,
    _table_root(params, root_rows),
    table_recurrent,
    legal,
    num_players=num_players,
    payoff=payoff,
    config=config,
    temperature=temperature,
  )


_run = jax.jit(_run_impl, static_argnames=("num_players", "payoff", "config"))


def _jnp(t, num_rows=40):
  """Device tables, padded with unreachable rows to `num_rows` so that tests
  of one shape share a compiled search."""

  def pad(x):
    extra = max(num_rows - x.shape[0], 0)
    return jnp.asarray(np.pad(x, [(0, extra)] + [(0, 0)] * (x.ndim - 1)))

  return jax.tree.map(pad, t)


# ----------------------------------------------------------------------------
# Independent reference: the same rules, written as plain Python on a dict tree.


class _Ref:
  """One node of the reference tree."""

  def __init__(self, row, kind, player, value, prior, num_slots):
    self.row, self.kind, self.player = row, kind, player
    self.value = float(value)
    self.prior = prior  # probabilities over the slots
    self.visits = 1
    self.children = {}
    self.child_visits = np.zeros(num_slots, np.int64)
    self.child_reward = np.zeros(num_slots)
    self.child_value = np.zeros(num_slots)


def _reference_search(
  t,
  root_row,
  legal,
  *,
  num_players,
  payoff,
  num_simulations,
  pb_c_init=1.25,
  pb_c_base=19652.0,
  terminal_nodes=True,
  discount=1.0,
):
  """Plain-Python NDMZ search (identity argmax, chance prior_minus_visits,
  no root noise). Returns (root node, smallest argmax margin seen)."""
  num_actions, num_outcomes = t["policy"].shape[1], t["chance"].shape[1]
  slots = max(num_actions, num_outcomes)
  margins = []

  def pad(p):
    return np.concatenate([p, np.zeros(slots - p.shape[0])])

  def argmax(score, valid):
    score = np.where(valid, score, -np.inf)
    order = np.argsort(-score, kind="stable")
    if valid.sum() > 1:
      margins.append(score[order[0]] - score[order[1]])
    return int(np.argmax(score))

  def make_child(parent, slot):
    if parent.kind == "terminal":
      return 0.0, _Ref(parent.row, "terminal", 0, 0.0, None, slots)
    unified = slot if parent.kind == "choice" else num_actions + slot
    row = int(t["next"][parent.row, unified])
    logits = t["identity"][row].astype(np.float64)
    if not terminal_nodes:
      logits[num_players + 1] = -np.inf
    cls = int(np.argmax(logits))
    if cls < num_players:
      kind, player, prior = "choice", cls, pad(softmax(t["policy"][row]))
    elif cls == num_players:
      kind, player, prior = "chance", 0, pad(softmax(t["chance"][row]))
    else:
      kind, player, prior = "terminal", 0, None
    value = 0.0 if kind == "terminal" else float(t["value"][row])
    return float(t["reward"][row]), _Ref(row, kind, player, value, prior, slots)

  def select(node, is_root):
    n = node.child_visits
    if node.kind == "terminal":
      return int(np.argmin(n))
    if node.kind == "chance":
      valid = np.arange(slots) < num_outcomes
      return argmax(node.prior - n / (1 + n.sum()), valid)
    sign = -1.0 if payoff == "zero_sum" and node.player != 0 else 1.0
    q = sign * (node.child_reward + discount * node.child_value)
    v = sign * node.value
    safe = np.where(n > 0, q, v)
    lo, hi = min(v, safe.min()), max(v, safe.max())
    value_score = (np.where(n > 0, q, lo) - lo) / max(hi - lo, 1e-8)
    pb_c = pb_c_init + math.log((node.visits + pb_c_base + 1) / pb_c_base)
    policy_score = math.sqrt(node.visits) * pb_c * node.prior / (n + 1)
    valid = np.pad(legal, (0, slots - num_actions)) if is_root else np.arange(slots) < num_actions
    return argmax(value_score + policy_score, valid)

  root_prior = softmax(np.where(legal, t["policy"][root_row], -np.inf))
  root = _Ref(root_row, "choice", 0, t["value"][root_row], pad(root_prior), slots)
  for _ in range(num_simulations):
    path, node = [], root
    while True:
      slot = select(node, node is root)
      path.append((node, slot))
      if slot not in node.children:
        break
      node = node.children[slot]
    parent, slot = path[-1]
    reward, leaf = make_child(parent, slot)
    parent.children[slot] = leaf
    parent.child_reward[slot] = reward
    value = leaf.value
    child = leaf
    for node, slot in reversed(path):
      value = node.child_reward[slot] + discount * value
      node.value = (node.value * node.visits + value) / (node.visits + 1)
      node.visits += 1
      node.child_value[slot] = child.value
      node.child_visits[slot] += 1
      child = node
  return root, (min(margins) if margins else np.inf)


def _assert_matches_reference(
  out,
  t,
  root_rows,
  legal,
  *,
  num_players,
  payoff,
  num_simulations,
  terminal_nodes=True,
  discount=1.0,
):
  """Root visits, root value and the whole tree's visit sum match."""
  for b, row in enumerate(root_rows):
    ref, margin = _reference_search(
      t,
      int(row),
      legal[b],
      num_players=num_players,
      payoff=payoff,
      num_simulations=num_simulations,
      terminal_nodes=terminal_nodes,
      discount=discount,
    )
    assert margin > 1e-5, "near tie: the comparison would be meaningless"
    num_actions = t["policy"].shape[1]
    np.testing.assert_array_equal(
      out.search_tree.children_visits[b, 0, :num_actions], ref.child_visits[:num_actions]
    )
    np.testing.assert_allclose(out.root_value[b], ref.value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
      out.search_tree.children_values[b, 0, :num_actions],
      ref.child_value[:num_actions],
      rtol=1e-5,
      atol=1e-5,
    )


# ----------------------------------------------------------------------------
# Hand-built trees.


def _duel_tables(num_players, num_actions=2, num_outcomes=1):
  """Root R (row 1, player 0): actions a0 -> X (row 2), a1 -> Y (row 3).
  X and Y belong to relative player `num_players - 1` (the opponent, or the
  root mover again when alone). X: a0 -> terminal, reward +1 (root POV);
  a1 -> terminal, reward -1. Y: both actions -> terminal, reward 0.
  Priors [0.6, 0.4] at R and X, [0.57, 0.43] at Y; V(R)=0, V(X)=0.5, V(Y)=0.
  Further actions (num_actions > 2) have prior ~0."""
  t = tables(8, num_actions, num_outcomes, num_players)
  t["policy"][:] = NEG
  t["policy"][1:3, :2] = np.log([0.6, 0.4])
  t["policy"][3, :2] = np.log([0.57, 0.43])
  t["next"][1, :2] = [2, 3]
  t["next"][2, :2] = [4, 5]
  t["next"][3, :2] = [6, 7]
  set_identity(t, 2, num_players - 1)
  set_identity(t, 3, num_players - 1)
  t["value"][2] = 0.5
  t["reward"][4], t["reward"][5] = 1.0, -1.0
  return t


# The reference comparisons share one compiled search per payoff: A=3, C=4,
# a batch of 3 and 30 simulations.
_REF_CONFIG = SearchConfig(
  num_simulations=30,
  dirichlet_fraction=0.0,
  identity_mode="argmax",
  chance_mode="prior_minus_visits",
)
_REF_CASES = [("zero_sum", 2), ("collaborative", 3), ("single", 1)]


# Three simulations, no noise (c = pb_c ~ 1.2501, 1.2502 at N = 2, 3):
#  1. R: scores c*[0.6, 0.4] -> a0; X expanded, backs up 0.5;
#     V(R) = (0 + 0.5) / 2 = 0.25.
#  2. R: Q(a0) = 0.5 normalises to 1 (min 0.25, max 0.5): a0. X: no visits,
#     prior decides -> a0: terminal reward +1 backs up;
#     V(X) = (0.5 + 1) / 2 = 0.75, V(R) = (0.25 * 2 + 1) / 3 = 0.5.
#  3. R: Q(a0) = 0.75 > V(R): a0 again. X (N=2):
#     zero-sum: the mover sees Q(a0) = -1 < -V(X) = -0.75, normalised 0;
#       policy sqrt(2)*c*[0.6/2, 0.4/1] -> a1: reward -1 backs up;
#       V(X) = (1.5 - 1) / 3 = 1/6, V(R) = (1.5 - 1) / 4 = 0.125.
#     collaborative / single: Q(a0) = 1 normalises to 1 -> a0 again, the
#       terminal child is passed (reward 0 below it): +1 backs up;
#       V(X) = (1.5 + 1) / 3 = 5/6, V(R) = (1.5 + 1) / 4 = 0.625.
_DUEL_CASES = [
  ("zero_sum", 2, 0.125, [1, 1]),
  ("collaborative", 2, 0.625, [2, 0]),
  ("single", 1, 0.625, [2, 0]),
]


@pytest.mark.parametrize("payoff,num_players,root_value,x_visits", _DUEL_CASES)
def test_reference_gives_hand_derived_duel(payoff, num_players, root_value, x_visits):
  t = _duel_tables(num_players)
  root, margin = _reference_search(
    t, 1, np.ones(2, bool), num_players=num_players, payoff=payoff, num_simulations=3
  )
  assert margin > 1e-3
  np.testing.assert_array_equal(root.child_visits, [3, 0])
  np.testing.assert_allclose(root.value, root_value)
  np.testing.assert_array_equal(root.children[0].child_visits, x_visits)


@pytest.mark.parametrize(
  "payoff,num_players,root_value,x_visits",
  [_DUEL_CASES[0]] + [pytest.param(*case, marks=pytest.mark.slow) for case in _DUEL_CASES[1:]],
)
def test_hand_built_duel(payoff, num_players, root_value, x_visits):
  t = _duel_tables(num_players)
  config = SearchConfig(num_simulations=3, dirichlet_fraction=0.0, identity_mode="argmax")
  legal = np.ones((2, 2), bool)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(3),
    jnp.array([1, 1]),
    jnp.asarray(legal),
    num_players=num_players,
    payoff=payoff,
    config=config,
  )
  tree = out.search_tree
  np.testing.assert_array_equal(tree.children_visits[:, 0, :2], [[3, 0]] * 2)
  np.testing.assert_allclose(out.root_value, [root_value] * 2, rtol=1e-6)
  x = tree.children_index[0, 0, 0]
  np.testing.assert_array_equal(tree.children_visits[0, x], x_visits)
  np.testing.assert_array_equal(tree.embeddings.kind[0, x], 0)  # choice
  np.testing.assert_array_equal(tree.embeddings.player[0, x], num_players - 1)
  np.testing.assert_allclose(out.action_weights, [[1.0, 0.0]] * 2)


@pytest.mark.parametrize("payoff,num_players", _REF_CASES)
def test_hand_built_duel_longer_matches_reference(payoff, num_players):
  t = _duel_tables(num_players, 3, 4)
  legal = np.array([[True, True, False]] * 3)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    jnp.array([1, 1, 1]),
    jnp.asarray(legal),
    num_players=num_players,
    payoff=payoff,
    config=_REF_CONFIG,
  )
  _assert_matches_reference(
    out, t, [1, 1, 1], legal, num_players=num_players, payoff=payoff, num_simulations=30
  )
  visits = np.asarray(out.search_tree.children_visits[0, 0, :2])
  if payoff == "zero_sum":
    # The opponent refutes a0 (-1), so a1 (worth 0) gets most visits.
    assert visits[1] > visits[0]
  else:
    assert visits[0] > visits[1]


@pytest.mark.parametrize("payoff,num_players", _REF_CASES)
def test_random_tables_match_reference(payoff, num_players):
  """Random models mixing choice nodes of every player, chance nodes and
  terminal nodes, several seeds, against the plain-Python reference."""
  num_actions, num_outcomes, batch = 3, 4, 3
  for seed in range(3):
    rng = np.random.default_rng(100 * seed + num_players)
    t = _random_tables(rng, 40, num_actions, num_outcomes, num_players)
    set_identity(t, 0, num_players + 1)
    roots = rng.integers(1, 40, batch)
    legal = rng.random((batch, num_actions)) < 0.7
    legal[:, 0] = True
    out = _run(
      _jnp(t),
      jax.random.PRNGKey(seed),
      jnp.asarray(roots),
      jnp.asarray(legal),
      num_players=num_players,
      payoff=payoff,
      config=_REF_CONFIG,
    )
    _assert_matches_reference(
      out, t, roots, legal, num_players=num_players, payoff=payoff, num_simulations=30
    )


def test_discount_matches_reference_and_changes_the_search():
  """A per-edge discount (zero-sum, random models): the tree backs up
  r + discount * V exactly as the reference does, and the root values differ
  from the undiscounted search's."""
  config = dataclasses.replace(_REF_CONFIG, discount=0.8)
  rng = np.random.default_rng(7)
  t = _random_tables(rng, 40, 3, 4, 2)
  set_identity(t, 0, 3)
  roots = rng.integers(1, 40, 3)
  legal = np.ones((3, 3), bool)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    jnp.asarray(roots),
    jnp.asarray(legal),
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  _assert_matches_reference(
    out, t, roots, legal, num_players=2, payoff="zero_sum", num_simulations=30, discount=0.8
  )
  plain = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    jnp.asarray(roots),
    jnp.asarray(legal),
    num_players=2,
    payoff="zero_sum",
    config=_REF_CONFIG,
  )
  assert not np.allclose(out.root_value, plain.root_value)


def test_dirichlet_noise_legal_only():
  """Legal-only noise puts all its mass on the legal actions, symmetrically;
  mctx-style noise puts only about legal/A of it there."""
  n, num_actions = 4000, 10
  legal = np.zeros((n, num_actions), bool)
  legal[:, [1, 4, 7]] = True
  probs = jnp.full((n, num_actions), 1.0 / num_actions)
  key = jax.random.PRNGKey(0)
  noisy = puct._add_dirichlet_noise(
    key, probs, dirichlet_alpha=0.3, dirichlet_fraction=1.0, legal=jnp.asarray(legal)
  )
  noisy = np.asarray(noisy)
  np.testing.assert_array_equal(noisy[~legal], 0.0)
  np.testing.assert_allclose(noisy.sum(-1), 1.0, rtol=1e-5)
  np.testing.assert_allclose(noisy[:, [1, 4, 7]].mean(0), 1 / 3, atol=0.03)
  mixed = np.asarray(
    puct._add_dirichlet_noise(
      key, probs, dirichlet_alpha=0.3, dirichlet_fraction=0.25, legal=jnp.asarray(legal)
    )
  )
  np.testing.assert_allclose(mixed[legal].reshape(n, 3).sum(-1), 0.75 * 0.3 + 0.25, rtol=1e-5)
  plain = np.asarray(
    puct._add_dirichlet_noise(key, probs, dirichlet_alpha=0.3, dirichlet_fraction=1.0)
  )
  np.testing.assert_allclose(plain[:, [1, 4, 7]].sum(-1).mean(), 0.3, atol=0.03)
  # No legal action: no noise is added.
  none = np.asarray(
    puct._add_dirichlet_noise(
      key,
      probs[:2],
      dirichlet_alpha=0.3,
      dirichlet_fraction=0.25,
      legal=jnp.zeros((2, num_actions), bool),
    )
  )
  np.testing.assert_allclose(none, 0.75 / num_actions)


# ----------------------------------------------------------------------------
# Equivalence with mctx.muzero_policy.


def _alternating_recurrent(params, rng_key, action, embedding, *, ndmz, num_players):
  """Mover-POV tables r, v (reward of the transition in the POV of the player
  who moved; value in the POV of the player to move). Embedding (row, player).
  As an NDMZ model it converts both to root POV (sign +1 for relative player
  0, -1 for player 1) and names the next player with the identity head."""
  del rng_key
  row, player = embedding
  nxt = params["next"][row, action]
  new_player = (player + 1) % num_players
  reward, value = params["reward"][nxt], params["value"][nxt]
  if not ndmz:
    out = mctx.RecurrentFnOutput(
      reward=reward,
      discount=jnp.full_like(reward, -1.0 if num_players == 2 else 1.0),
      prior_logits=params["policy"][nxt],
      value=value,
    )
    return out, (nxt, new_player)
  sign = lambda p: 1.0 - 2.0 * (p == 1)  # root POV from mover POV
  identity = jnp.where(jax.nn.one_hot(new_player, num_players + 2) > 0, 0.0, NEG)
  return ModelOutput(
    reward=sign(player) * reward,
    value=sign(new_player) * value,
    policy_logits=params["policy"][nxt],
    chance_logits=jnp.zeros((row.shape[0], 2)),
    identity_logits=identity,
    embedding=(nxt, new_player),
  )


@functools.partial(jax.jit, static_argnames=("num_players", "config"))
def _run_pair(params, key, root_rows, legal, *, num_players, config):
  b = root_rows.shape[0]
  embedding = (root_rows, jnp.zeros(b, jnp.int32))
  root = ModelOutput(
    reward=jnp.zeros(b),
    value=params["value"][root_rows],
    policy_logits=params["policy"][root_rows],
    chance_logits=jnp.zeros((b, 2)),
    identity_logits=jnp.zeros((b, num_players + 2)),
    embedding=embedding,
  )
  ndmz = ndmz_search(
    params,
    key,
    root,
    functools.partial(_alternating_recurrent, ndmz=True, num_players=num_players),
    legal,
    num_players=num_players,
    payoff="zero_sum" if num_players == 2 else "single",
    config=config,
  )
  muzero = mctx.muzero_policy(
    params,
    key,
    mctx.RootFnOutput(prior_logits=root.policy_logits, value=root.value, embedding=embedding),
    functools.partial(_alternating_recurrent, ndmz=False, num_players=num_players),
    num_simulations=config.num_simulations,
    invalid_actions=(~legal).astype(jnp.float32),
    dirichlet_fraction=config.dirichlet_fraction,
    dirichlet_alpha=config.dirichlet_alpha,
    pb_c_init=config.pb_c_init,
    pb_c_base=config.pb_c_base,
  )
  return ndmz, muzero


@pytest.mark.parametrize("num_players", [2, 1])
def test_equals_muzero_policy(num_players):
  """Two alternating players == muzero_policy with discount -1; one player ==
  discount +1. Same key, Dirichlet noise on, several random models."""
  config = SearchConfig(num_simulations=32)
  num_actions, num_rows, batch = 4, 50, 4
  for seed in range(4):
    rng = np.random.default_rng(seed)
    params = dict(
      next=rng.integers(0, num_rows, (num_rows, num_actions)),
      reward=rng.normal(size=num_rows).astype(np.float32),
      value=rng.normal(size=num_rows).astype(np.float32),
      policy=rng.normal(size=(num_rows, num_actions)).astype(np.float32),
    )
    legal = rng.random((batch, num_actions)) < 0.75
    legal[:, 1] = True
    roots = rng.integers(0, num_rows, batch)
    ndmz, muzero = _run_pair(
      _jnp(params),
      jax.random.PRNGKey(seed + 7),
      jnp.asarray(roots),
      jnp.asarray(legal),
      num_players=num_players,
      config=config,
    )
    np.testing.assert_array_equal(
      ndmz.search_tree.children_visits[:, 0], muzero.search_tree.children_visits[:, 0]
    )
    np.testing.assert_array_equal(ndmz.search_tree.node_visits, muzero.search_tree.node_visits)
    np.testing.assert_allclose(ndmz.action_weights, muzero.action_weights)
    np.testing.assert_allclose(
      ndmz.root_value, muzero.search_tree.node_values[:, 0], rtol=1e-5, atol=1e-6
    )
    np.testing.assert_array_equal(ndmz.action, muzero.action)


def test_single_outcome_chance_is_plain_muzero():
  """Bandit: root action a -> chance node (reward r_a, value 0) whose only
  outcome (prob 1) leads to a terminal node (reward 0). Its visit counts are
  those of muzero_policy on the bandit with reward r_a and discount 0."""
  num_actions, batch = 4, 3
  config = SearchConfig(num_simulations=20)

  @jax.jit
  def run(rewards, key):
    t = tables(2 + num_actions, num_actions, 3, 2)
    nxt = jnp.asarray(t["next"])
    nxt = nxt.at[1, :num_actions].set(jnp.arange(num_actions) + 2)
    identity = jnp.asarray(t["identity"])
    identity = identity.at[2:].set(jnp.array([NEG, NEG, 0.0, NEG]))
    chance = jnp.asarray(t["chance"]).at[:, 1:].set(-jnp.inf)

    def recurrent(params, rng_key, action, embedding):
      del params, rng_key
      row = nxt[embedding, action]
      reward = jnp.where(row >= 2, rewards[jnp.arange(batch), row - 2], 0.0)
      return ModelOutput(
        reward=reward,
        value=jnp.zeros(batch),
        policy_logits=jnp.zeros((batch, num_actions)),
        chance_logits=chance[row],
        identity_logits=identity[row],
        embedding=row,
      )

    root = ModelOutput(
      reward=jnp.zeros(batch),
      value=jnp.zeros(batch),
      policy_logits=jnp.zeros((batch, num_actions)),
      chance_logits=jnp.zeros((batch, 3)),
      identity_logits=jnp.zeros((batch, 4)),
      embedding=jnp.ones(batch, jnp.int32),
    )
    legal = jnp.ones((batch, num_actions), bool)
    outs = [
      ndmz_search((), key, root, recurrent, legal, num_players=2, payoff="zero_sum", config=config)
    ]

    def bandit(params, rng_key, action, embedding):
      del params, rng_key
      reward = rewards[jnp.arange(batch), action]
      return mctx.RecurrentFnOutput(
        reward=reward,
        discount=jnp.zeros_like(reward),
        prior_logits=jnp.zeros((batch, num_actions)),
        value=jnp.zeros_like(reward),
      ), embedding

    muzero = mctx.muzero_policy(
      (),
      key,
      mctx.RootFnOutput(
        prior_logits=root.policy_logits, value=root.value, embedding=root.embedding
      ),
      bandit,
      num_simulations=config.num_simulations,
    )
    return outs, muzero

  for seed in range(3):
    rewards = jax.random.normal(jax.random.PRNGKey(seed), (batch, num_actions))
    outs, muzero = run(rewards, jax.random.PRNGKey(seed + 50))
    for out in outs:
      np.testing.assert_array_equal(
        out.search_tree.children_visits[:, 0], muzero.search_tree.children_visits[:, 0]
      )
      np.testing.assert_allclose(
        out.root_value, muzero.search_tree.node_values[:, 0], rtol=1e-5, atol=1e-6
      )
      chance_nodes = out.search_tree.children_index[:, 0]
      kinds = np.take_along_axis(
        np.asarray(out.search_tree.embeddings.kind), np.maximum(np.asarray(chance_nodes), 0), 1
      )
      # Every visited root action has its child, and every child is a chance
      # node (an empty selection cannot pass: some action is always visited).
      expanded = np.asarray(chance_nodes) >= 0
      visited = np.asarray(out.search_tree.children_visits[:, 0]) > 0
      np.testing.assert_array_equal(expanded, visited)
      assert expanded.any() and np.all(kinds[expanded] == 1)


# ----------------------------------------------------------------------------
# Chance nodes, identity sampling, terminal nodes.


def _chance_fan_tables(probs, num_actions=3):
  """Root (row 1) has one legal action, to a chance node (row 2) whose
  outcomes lead to terminal rows with reward = outcome index."""
  c = len(probs)
  t = tables(3 + c, num_actions, c, 2)
  t["next"][1, 0] = 2
  t["next"][2, num_actions:] = np.arange(c) + 3
  set_identity(t, 2, 2)
  t["chance"][2] = np.log(np.asarray(probs, np.float32))
  t["reward"][3:] = np.arange(c)
  return t


def _chance_node_visits(out):
  tree = out.search_tree
  node = np.asarray(tree.children_index[:, 0, 0])
  kinds = np.asarray(tree.embeddings.kind)[np.arange(node.shape[0]), node]
  assert np.all(kinds == 1)
  return np.asarray(tree.children_visits)[np.arange(node.shape[0]), node]


def test_chance_node_prior_minus_visits_is_exact():
  probs = np.array([0.44, 0.31, 0.16, 0.09])
  t = _chance_fan_tables(probs)
  sims = _REF_CONFIG.num_simulations
  legal = np.array([[True, False, False]] * 3)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    jnp.array([1, 1, 1]),
    jnp.asarray(legal),
    num_players=2,
    payoff="zero_sum",
    config=_REF_CONFIG,
  )
  # prob - visits / (1 + sum visits), by hand: [.44 .31 .16 .09] -> 0;
  # [-.06 .31 .16 .09] -> 1; [.107 -.023 .16 .09] -> 2;
  # [.19 .06 -.09 .09] -> 0.
  visits, seq, margins = np.zeros(4), [], []
  for _ in range(sims - 1):  # the first simulation expands the chance node
    score = probs - visits / (1 + visits.sum())
    top2 = np.sort(score)[-2:]
    margins.append(top2[1] - top2[0])
    seq.append(int(np.argmax(score)))
    visits[seq[-1]] += 1
  assert seq[:4] == [0, 1, 2, 0] and min(margins) > 1e-3
  np.testing.assert_array_equal(_chance_node_visits(out), [visits] * 3)
  # Outcome c brings reward c; the root value averages the root's and the
  # chance node's raw values (0) and one reward per later simulation.
  expected = (visits @ np.arange(4)) / (sims + 1)
  np.testing.assert_allclose(out.root_value, [expected] * 3, rtol=1e-5)
  _assert_matches_reference(
    out, t, [1, 1, 1], legal, num_players=2, payoff="zero_sum", num_simulations=sims
  )


# The sampling tests share one compiled search: default (sampling) modes,
# Dirichlet noise on, 80 simulations, a batch of 64.
_SAMPLE_CONFIG = SearchConfig(num_simulations=80)
_SAMPLE_BATCH = 64


def _run_sample(t):
  legal = jnp.array([[True, False, False]] * _SAMPLE_BATCH)
  return _run(
    _jnp(t),
    jax.random.PRNGKey(11),
    jnp.ones(_SAMPLE_BATCH, jnp.int32),
    legal,
    num_players=2,
    payoff="zero_sum",
    config=_SAMPLE_CONFIG,
  )


def test_chance_node_samples_in_proportion():
  probs = np.array([0.4, 0.3, 0.2, 0.1])
  visits = _chance_node_visits(_run_sample(_chance_fan_tables(probs))).sum(0)
  assert visits.sum() == _SAMPLE_BATCH * (_SAMPLE_CONFIG.num_simulations - 1)
  # 5,056 draws: one standard error of a frequency is below 0.007.
  np.testing.assert_allclose(visits / visits.sum(), probs, atol=0.03)


def test_identity_head_is_sampled():
  """Every row past the root has identity probabilities (player 0,
  player 1, chance, terminal) = (.2, .1, .45, .25): each node created below a
  non-terminal node is one roulette-wheel draw."""
  probs = np.array([0.2, 0.1, 0.45, 0.25])
  t = tables(3, 3, 4, 2)
  t["next"][1:] = 2
  t["identity"][2] = np.log(probs)
  tree = _run_sample(t).search_tree
  kind = np.asarray(tree.embeddings.kind)
  player = np.asarray(tree.embeddings.player)
  parents = np.asarray(tree.parents)
  parent_kind = np.take_along_axis(kind, np.maximum(parents, 0), 1)
  drawn = (parents >= 0) & (parent_kind != 2)
  cls = np.where(kind == 0, player, np.where(kind == 1, 2, 3))[drawn]
  assert cls.size > 1500
  # One standard error of a frequency is below 0.013.
  np.testing.assert_allclose(np.bincount(cls, minlength=4) / cls.size, probs, atol=0.05)
  assert np.all(kind[parent_kind == 2] == 2)


@pytest.mark.parametrize("terminal_nodes", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_terminal_nodes_are_not_expanded(terminal_nodes):
  """Root actions a -> terminal rows with reward r_a. Past them the model
  would give large rewards and values (rows 5, 6): with terminal nodes they
  never reach the tree, and Q(root, a) is exactly r_a."""
  t = tables(7, 3, 4, 2)
  t["policy"][:] = [0.3, 0.1, 0.2]
  t["next"][1, :3] = [2, 3, 4]
  t["reward"][2:5] = [0.25, -0.5, 0.75]
  t["value"][2:5] = [9.0, 9.0, 9.0]  # ignored: terminal value is 0
  t["next"][2:5] = 5
  t["next"][5] = 6
  t["reward"][5:] = 100.0
  t["value"][5:] = 50.0
  set_identity(t, 5, 0)
  set_identity(t, 6, 1)
  config = dataclasses.replace(_REF_CONFIG, terminal_nodes=terminal_nodes)
  legal = np.ones((3, 3), bool)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(1),
    jnp.array([1, 1, 1]),
    jnp.asarray(legal),
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  tree = out.search_tree
  kinds = np.asarray(tree.embeddings.kind)
  if terminal_nodes:
    np.testing.assert_array_equal(kinds[:, 1:], 2)
    np.testing.assert_allclose(
      tree.qvalues(jnp.zeros(3, jnp.int32))[:, :3], [[0.25, -0.5, 0.75]] * 3
    )
    np.testing.assert_array_equal(tree.raw_values[:, 1:], 0.0)
    np.testing.assert_array_equal(tree.node_values[:, 1:], 0.0)
    below = np.asarray(tree.parents)[:, 1:] > 0
    assert below.any()  # mctx did grow nodes below terminal nodes...
    rewards = np.asarray(tree.children_rewards)[:, 1:]
    np.testing.assert_array_equal(rewards, 0.0)  # ...that add nothing
  else:
    assert (kinds[:, 1:] == 0).any()  # the search ran past the ends
    assert np.abs(np.asarray(tree.children_rewards)).max() == 100.0
  _assert_matches_reference(
    out,
    t,
    [1, 1, 1],
    legal,
    num_players=2,
    payoff="zero_sum",
    num_simulations=30,
    terminal_nodes=terminal_nodes,
  )


# ----------------------------------------------------------------------------
# Action output, shapes, errors.


def test_temperature_zero_is_greedy_ties_by_prior_one_samples_visits():
  # Bandit of terminal children with reward 0, legal priors [0, 1.9, 2.0]:
  # simulation 1 takes a2 (largest prior); then Q = V = 0 everywhere and a1
  # (p1 > p2 / 2) comes next: a tie of one visit each. Greedy breaks it by
  # the prior (a2), not by the index (a1); temperature 1 draws either half
  # the time.
  t = tables(6, 4, 1, 2)
  t["next"][1, :4] = [2, 3, 4, 5]
  t["policy"][1] = [0.0, 1.9, 2.0, 3.0]
  # The last row has no legal action (a finished game): uniform weights.
  batch = 1025
  legal = jnp.array([[True, True, True, False]] * (batch - 1) + [[False] * 4])
  config = SearchConfig(num_simulations=2, dirichlet_fraction=0.0)
  rows = jnp.ones(batch, jnp.int32)
  greedy = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    rows,
    legal,
    0.0,
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  np.testing.assert_allclose(greedy.action_weights, [[0, 0.5, 0.5, 0]] * (batch - 1) + [[0.25] * 4])
  np.testing.assert_array_equal(greedy.action, [2] * (batch - 1) + [0])
  assert np.all(np.isfinite(greedy.root_value))
  sampled = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    rows,
    legal,
    1.0,
    num_players=2,
    payoff="zero_sum",
    config=config,
  )
  np.testing.assert_allclose(sampled.action_weights, greedy.action_weights)
  assert set(np.unique(sampled.action[:-1])) == {1, 2}
  # One standard error is about 0.016.
  np.testing.assert_allclose(np.mean(np.asarray(sampled.action[:-1]) == 2), 0.5, atol=0.07)


def test_jit_vmap_and_illegal_actions_never_chosen():
  rng = np.random.default_rng(9)
  t = _jnp(_random_tables(rng, 40, 3, 4, 2))
  legal = jnp.array([[True, False, True], [False, True, False], [True, True, True]])
  run = functools.partial(_run_impl, num_players=2, payoff="zero_sum", config=_REF_CONFIG)
  keys = jax.random.split(jax.random.PRNGKey(0), 2)
  rows = jnp.array([[1, 2, 3], [4, 5, 6]])
  batched = jax.jit(jax.vmap(run, in_axes=(None, 0, 0, None)))(t, keys, rows, legal)
  for i in range(2):
    single = _run(t, keys[i], rows[i], legal, num_players=2, payoff="zero_sum", config=_REF_CONFIG)
    chex.assert_trees_all_close(jax.tree.map(lambda x: x[i], batched), single)
    visits = np.asarray(single.search_tree.children_visits[:, 0, :3])
    assert np.all(visits[~np.asarray(legal)] == 0)
    assert np.all(np.asarray(legal)[np.arange(3), single.action])
    chex.assert_shape(single.action_weights, (3, 3))
    chex.assert_shape(single.root_value, (3,))
    chex.assert_shape(single.search_tree.children_visits, (3, 31, 4))


def test_recurrent_output_shapes_are_checked():
  t = _jnp(tables(3, 2, 2, 2))

  def bad_recurrent(params, rng_key, action, embedding):
    out = table_recurrent(params, rng_key, action, embedding)
    return out.replace(identity_logits=out.identity_logits[:, :3])

  run = jax.jit(
    lambda key: ndmz_search(
      t,
      key,
      _table_root(t, jnp.array([1])),
      bad_recurrent,
      jnp.ones((1, 2), bool),
      num_players=2,
      payoff="zero_sum",
      config=SearchConfig(num_simulations=2),
    )
  )
  with pytest.raises(AssertionError, match="identity_logits"):
    run(jax.random.PRNGKey(0))


def test_wrong_input_shapes_are_named_at_trace_time():
  # jax.eval_shape traces without compiling: the checks cost nothing at run time.
  t = _jnp(tables(3, 2, 2, 2))
  root = _table_root(t, jnp.array([1, 2]))
  legal = jnp.ones((2, 2), bool)

  def trace(root=root, temperature=1.0):
    run = functools.partial(
      ndmz_search, num_players=2, payoff="zero_sum", config=SearchConfig(num_simulations=2)
    )
    key = jax.random.PRNGKey(0)
    return jax.eval_shape(
      lambda: run(t, key, root, table_recurrent, legal, temperature=temperature)
    )

  chex.assert_shape(trace(temperature=jnp.ones((2,))).action, (2,))
  with pytest.raises(AssertionError, match=r"root.embedding must be \[B, ...\]"):
    trace(root=root.replace(embedding=root.embedding[:1]))
  with pytest.raises(AssertionError, match=r"temperature must be a scalar or \[B\]"):
    trace(temperature=jnp.ones((2, 1)))
  with pytest.raises(AssertionError, match="visits, prior_logits, legal"):
    puct.select_action(jax.random.PRNGKey(0), jnp.ones((2, 3)), jnp.ones((2, 3)), legal, 1.0)


def test_bad_arguments_raise_value_error():
  t = _jnp(tables(3, 2, 2, 2))
  root = _table_root(t, jnp.array([1]))
  call = functools.partial(
    ndmz_search,
    t,
    jax.random.PRNGKey(0),
    root,
    table_recurrent,
    jnp.ones((1, 2), bool),
    config=SearchConfig(num_simulations=2),
  )
  with pytest.raises(ValueError, match="payoff"):
    call(num_players=2, payoff="general")
  with pytest.raises(ValueError, match="num_players == 1"):
    call(num_players=2, payoff="single")
  with pytest.raises(ValueError, match="legal_action_mask"):
    ndmz_search(
      t,
      jax.random.PRNGKey(0),
      root,
      table_recurrent,
      jnp.ones((1, 3), bool),
      num_players=2,
      payoff="zero_sum",
      config=SearchConfig(num_simulations=2),
    )
  for bad in (
    dict(num_simulations=0),
    dict(identity_mode="max"),
    dict(chance_mode="argmax"),
    dict(dirichlet_fraction=1.5),
    dict(max_depth=0),
    dict(discount=0.0),
    dict(discount=1.5),
  ):
    with pytest.raises(ValueError):
      SearchConfig(**bad)
  assert hash(SearchConfig()) == hash(SearchConfig())
  assert search.SearchOutput is not None
