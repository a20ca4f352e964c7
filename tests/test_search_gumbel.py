"""Tests of the Gumbel root of the NDMZ search (`SearchConfig(root="gumbel")`).

Three kinds of evidence:
* with a model that has no chance nodes and strictly alternates two players
  (or has one player), the search equals `mctx.gumbel_muzero_policy` for the
  same key: same action, policy target, visit counts of the whole tree;
* on a hand-built model with a chance node below the root, the numbers are
  derived by hand (written out below); `_reference_search`, an independent
  plain-Python (float64) Gumbel NDMZ search, reproduces them and also
  matches the JAX search on random models mixing choice nodes of both
  players, chance nodes and terminal nodes;
* bad settings give clear errors, and `search.root=gumbel` runs in a tiny
  Anakin step.
"""

import dataclasses
import functools
import math

import jax
import jax.numpy as jnp
import mctx
from mctx._src import seq_halving  # mctx's own table, to check our copy
import numpy as np
import pytest
from search_tables import NEG, set_identity, softmax, table_recurrent, tables
import tiny

from anakin_mz.core.search import gumbel
from anakin_mz.agents.replay_learner import Learner
from anakin_mz.core.search import SearchConfig, ndmz_search
from anakin_mz.core.types import ModelOutput


# ----------------------------------------------------------------------------
# Equality with mctx.gumbel_muzero_policy.


def _alternating_recurrent(params, rng_key, action, embedding, *, ndmz, num_players):
  """Mover-POV tables (reward of the transition for the player who moved,
  value for the player to move); embedding (row, player). As an NDMZ model
  it converts both to root POV and names the next player with the identity
  head; as an mctx model it uses discount -1 (two players) or +1 (one)."""
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
def _run_pair(params, key, root_rows, legal, scale, *, num_players, config):
  """NDMZ search with temperature `scale` and mctx.gumbel_muzero_policy with
  gumbel_scale `scale` (config.gumbel_scale is 1), same key."""
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
    temperature=scale,
  )
  gumbel = mctx.gumbel_muzero_policy(
    params,
    key,
    mctx.RootFnOutput(prior_logits=root.policy_logits, value=root.value, embedding=embedding),
    functools.partial(_alternating_recurrent, ndmz=False, num_players=num_players),
    num_simulations=config.num_simulations,
    invalid_actions=(~legal).astype(jnp.float32),
    max_num_considered_actions=config.max_num_considered_actions,
    gumbel_scale=scale,
  )
  return ndmz, gumbel


# Two players: 4 of 6 actions considered, 20 simulations (three halving
# rounds); one player: every legal action considered, 12 simulations.
@pytest.mark.parametrize("num_players,sims,considered", [(2, 20, 4), (1, 12, 16)])
def test_equals_gumbel_muzero_policy(num_players, sims, considered):
  """Same key: the same action, policy target and visit counts (the whole
  tree) as mctx, with the Gumbel noise on (temperature 1 = gumbel_scale 1)
  and off (temperature 0 = gumbel_scale 0). The last root has no legal
  action: uniform weights and action 0, as mctx."""
  config = SearchConfig(
    num_simulations=sims, root="gumbel", max_num_considered_actions=min(considered, sims)
  )
  num_actions, num_rows, batch = 6, 50, 5
  noise_changed_a_move = False
  for seed in range(3):
    rng = np.random.default_rng(seed)
    params = dict(
      next=rng.integers(0, num_rows, (num_rows, num_actions)),
      reward=rng.normal(size=num_rows).astype(np.float32),
      value=rng.normal(size=num_rows).astype(np.float32),
      policy=rng.normal(size=(num_rows, num_actions)).astype(np.float32),
    )
    params = jax.tree.map(jnp.asarray, params)
    legal = rng.random((batch, num_actions)) < 0.6
    legal[:, 1] = True
    legal[-1] = False
    roots = jnp.asarray(rng.integers(0, num_rows, batch))
    actions = []
    for scale in (1.0, 0.0):
      ndmz, gumbel = _run_pair(
        params,
        jax.random.PRNGKey(seed + 7),
        roots,
        jnp.asarray(legal),
        scale,
        num_players=num_players,
        config=config,
      )
      np.testing.assert_array_equal(
        ndmz.search_tree.children_visits, gumbel.search_tree.children_visits
      )
      np.testing.assert_array_equal(ndmz.search_tree.node_visits, gumbel.search_tree.node_visits)
      np.testing.assert_array_equal(ndmz.action, gumbel.action)
      np.testing.assert_array_equal(ndmz.action_weights, gumbel.action_weights)
      np.testing.assert_array_equal(ndmz.root_value, gumbel.search_tree.node_values[:, 0])
      weights = np.asarray(ndmz.action_weights)
      np.testing.assert_array_equal(weights[:-1][~legal[:-1]], 0.0)
      np.testing.assert_allclose(weights[-1], 1 / num_actions)
      assert np.all(legal[np.arange(batch - 1), ndmz.action[:-1]])
      assert ndmz.action[-1] == 0
      actions.append(np.asarray(ndmz.action))
    noise_changed_a_move |= not np.array_equal(*actions)
  assert noise_changed_a_move  # the Gumbel noise was really on


def test_sequential_halving_table_is_mctx_s():
  for m, n in [(1, 5), (2, 4), (4, 20), (16, 16), (16, 50), (5, 7)]:
    assert gumbel._table_of_considered_visits(m, n) == seq_halving.get_table_of_considered_visits(
      m, n
    )


# ----------------------------------------------------------------------------
# Plain-Python reference: the Gumbel NDMZ search on table models.


def _run_impl(params, key, root_rows, legal, temperature, *, num_players, payoff, config):
  b = root_rows.shape[0]
  root = ModelOutput(
    reward=jnp.zeros(b),
    value=params["value"][root_rows],
    policy_logits=params["policy"][root_rows],
    chance_logits=params["chance"][root_rows],
    identity_logits=params["identity"][root_rows],
    embedding=root_rows.astype(jnp.int32),
  )
  return ndmz_search(
    params,
    key,
    root,
    table_recurrent,
    legal,
    num_players=num_players,
    payoff=payoff,
    config=config,
    temperature=temperature,
  )


_run = jax.jit(_run_impl, static_argnames=("num_players", "payoff", "config"))


def _jnp(t, num_rows=40):
  """Device tables padded to `num_rows` rows (one compile per shape)."""

  def pad(x):
    extra = max(num_rows - x.shape[0], 0)
    return jnp.asarray(np.pad(x, [(0, extra)] + [(0, 0)] * (x.ndim - 1)))

  return jax.tree.map(pad, t)


def _root_gumbel(key, batch, num_actions, temperature):
  """The root Gumbel the search draws: mctx's split (search, gumbel)."""
  _, gumbel_key = jax.random.split(key)
  return temperature * np.asarray(jax.random.gumbel(gumbel_key, (batch, num_actions)), np.float64)


class _Ref:
  """One node of the reference tree."""

  def __init__(self, row, kind, player, raw, logits, num_slots):
    self.row, self.kind, self.player = row, kind, player
    self.raw = float(raw)  # the model's value (0 at terminal nodes)
    self.value = float(raw)  # running mean of the backed-up returns
    self.logits = logits  # prior logits over the slots (None: terminal)
    self.visits = 1
    self.children = {}
    self.child_visits = np.zeros(num_slots, np.int64)
    self.child_reward = np.zeros(num_slots)
    self.child_value = np.zeros(num_slots)


def _sigma_completed_q(node, sign, num_actions, discount, *, value_scale=0.1, maxvisit_init=50.0):
  """Completed Q (mixed value), rescaled to [0, 1], times (c_visit + max N)
  c_scale, over the A choice slots, from the mover's side."""
  n = node.child_visits[:num_actions]
  q = sign * (node.child_reward + discount * node.child_value)[:num_actions]
  probs = softmax(node.logits[:num_actions])
  visited = n > 0
  weighted = probs[visited] @ q[visited] / probs[visited].sum() if visited.any() else 0.0
  mixed = (sign * node.raw + n.sum() * weighted) / (n.sum() + 1)
  completed = np.where(visited, q, mixed)
  low, high = completed.min(), completed.max()
  completed = (completed - low) / max(high - low, 1e-8)
  return (maxvisit_init + n.max()) * value_scale * completed


def _reference_search(
  t, root_row, legal, gumbel, *, num_players, payoff, num_simulations, max_considered, discount=1.0
):
  """Plain-Python Gumbel NDMZ search (identity argmax, chance
  prior_minus_visits). Returns (root node, action, action_weights, smallest
  argmax margin seen)."""
  num_actions, num_outcomes = t["policy"].shape[1], t["chance"].shape[1]
  slots = max(num_actions, num_outcomes)
  margins = []
  low_logit = np.finfo(np.float32).min

  def pad(x):
    return np.concatenate([x, np.full(slots - x.shape[0], low_logit)])

  def argmax(score, valid):
    score = np.where(valid, score, -np.inf)
    order = np.argsort(-score, kind="stable")
    if np.isfinite(score[order[1]]):
      margins.append(score[order[0]] - score[order[1]])
    return int(order[0])

  def make_child(parent, slot):
    if parent.kind == "terminal":
      return 0.0, _Ref(parent.row, "terminal", 0, 0.0, None, slots)
    unified = slot if parent.kind == "choice" else num_actions + slot
    row = int(t["next"][parent.row, unified])
    cls = int(np.argmax(t["identity"][row]))
    if cls < num_players:
      kind, player, logits = "choice", cls, pad(t["policy"][row])
    elif cls == num_players:
      kind, player, logits = "chance", 0, pad(t["chance"][row])
    else:
      kind, player, logits = "terminal", 0, None
    raw = 0.0 if kind == "terminal" else float(t["value"][row])
    return float(t["reward"][row]), _Ref(row, kind, player, raw, logits, slots)

  table = seq_halving.get_table_of_considered_visits(max_considered, num_simulations)
  considered = min(max_considered, int(legal.sum()))
  root_logits = np.where(legal, t["policy"][root_row].astype(np.float64), -np.inf)
  root_logits -= root_logits.max()

  def select(node, is_root):
    n = node.child_visits
    if node.kind == "terminal":
      return int(np.argmin(n))
    if node.kind == "chance":
      probs = softmax(node.logits)
      return argmax(probs - n / (1 + n.sum()), np.arange(slots) < num_outcomes)
    sign = -1.0 if payoff == "zero_sum" and node.player != 0 else 1.0
    sigma = _sigma_completed_q(node, sign, num_actions, discount)
    if is_root:  # sequential halving
      visit = table[considered][n.sum()]
      score = np.where(n[:num_actions] == visit, gumbel + root_logits + sigma, -np.inf)
      return argmax(score, legal)
    improved = softmax(node.logits[:num_actions] + sigma)
    return argmax(improved - n[:num_actions] / (1 + n.sum()), np.ones(num_actions, bool))

  root = _Ref(
    root_row, "choice", 0, t["value"][root_row], pad(np.where(legal, root_logits, low_logit)), slots
  )
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
    value, child = leaf.value, leaf
    for node, slot in reversed(path):
      value = node.child_reward[slot] + discount * value
      node.value = (node.value * node.visits + value) / (node.visits + 1)
      node.visits += 1
      node.child_value[slot] = child.value
      node.child_visits[slot] += 1
      child = node

  n = root.child_visits[:num_actions]
  sigma = _sigma_completed_q(root, 1.0, num_actions, discount)
  action = argmax(np.where(n == n.max(), gumbel + root_logits + sigma, -np.inf), legal)
  weights = np.where(legal, softmax(np.where(legal, root_logits + sigma, -np.inf)), 0.0)
  return root, action, weights, min(margins)


def _assert_matches_reference(
  out, t, root_rows, legal, gumbel, *, num_players, payoff, num_simulations, max_considered
):
  num_actions = t["policy"].shape[1]
  for b, row in enumerate(root_rows):
    ref, action, weights, margin = _reference_search(
      t,
      int(row),
      legal[b],
      gumbel[b],
      num_players=num_players,
      payoff=payoff,
      num_simulations=num_simulations,
      max_considered=max_considered,
    )
    assert margin > 1e-4, "near tie: the comparison would be meaningless"
    np.testing.assert_array_equal(
      out.search_tree.children_visits[b, 0, :num_actions], ref.child_visits[:num_actions]
    )
    assert int(out.action[b]) == action
    np.testing.assert_allclose(out.action_weights[b], weights, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(out.root_value[b], ref.value, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
      out.search_tree.children_values[b, 0, :num_actions],
      ref.child_value[:num_actions],
      rtol=1e-5,
      atol=1e-5,
    )


# ----------------------------------------------------------------------------
# A hand-built model with a chance node below the root.


def _bet_tables():
  """Root R (row 1), actions a0, a1 legal, a2 illegal; prior logits
  [0.5, 0, 2] (a2's high logit must not matter), V(R) = 0.
  a0 -> chance node X (row 2), reward 0, V(X) = 0.1; outcomes with
  probabilities [0.72, 0.28] lead to terminal rows with rewards +1, -1.
  a1 -> terminal row 3, reward 0.2."""
  t = tables(6, 3, 2, 2)
  t["policy"][1] = [0.5, 0.0, 2.0]
  t["next"][1, :3] = [2, 3, 3]
  set_identity(t, 2, 2)  # chance
  t["value"][2] = 0.1
  t["chance"][2] = np.log([0.72, 0.28])
  t["next"][2, 3:] = [4, 5]
  t["reward"][3:6] = [0.2, 1.0, -1.0]
  return t


_BET_LEGAL = np.array([True, True, False])

# Four simulations, m = 2, no Gumbel noise (temperature 0). Sequential
# halving over 2 considered actions visits [0, 0, 1, 1] (the table row for
# m = 2, n = 4). Centred legal logits l = [0, -0.5]; p = softmax(l) =
# [0.622459, 0.377541].
#  1. Visit target 0, no Q yet (sigma = 0): l decides -> a0. X is created
#     (raw 0.1): Q(a0) = 0.1, V(R) = (0 + 0.1) / 2 = 0.05.
#  2. Visit target 0: only a1 has 0 visits -> a1, terminal, reward 0.2:
#     Q(a1) = 0.2, V(R) = (0.1 + 0.2) / 3 = 0.1.
#  3. Visit target 1: a0 and a1. Mixed value (0 + 2 (p0 0.1 + p1 0.2)) / 3 =
#     0.091836 completes a2; rescaled [0.075477, 1, 0] times (50 + 1) 0.1:
#     sigma = [0.384934, 5.1, .]; scores l + sigma = [0.3849, 4.6] -> a1. The
#     walk goes into the terminal node (its reward-0, value-0 child backs up
#     0): Q(a1) = 0.2, V(R) = (0.3 + 0.2) / 4 = 0.125.
#  4. Visit target 1: only a0 -> a0 -> X, prior_minus_visits picks outcome 0
#     (0.72 > 0.28): reward +1, V(X) = (0.1 + 1) / 2 = 0.55 = Q(a0),
#     V(R) = (0.5 + 1) / 5 = 0.3.
# End: visits [2, 2, 0]. Mixed value 4 (p0 0.55 + p1 0.2) / 5 = 0.334288;
# completed Q [0.55, 0.2, 0.334288] rescales to [1, 0, 0.383680]; times
# (50 + 2) 0.1: sigma = [5.2, 0, 1.995136]. Action: argmax over the most
# visited (both) of l + sigma = [5.2, -0.5] -> a0. Policy target
# softmax([5.2, -0.5]) = [0.996665, 0.003335, 0].
_BET_VISITS = [2, 2, 0]
_BET_ROOT_VALUE = 0.3
_BET_Q = [0.55, 0.2]
_BET_WEIGHTS = [1 / (1 + math.exp(-5.7)), math.exp(-5.7) / (1 + math.exp(-5.7)), 0.0]


def test_reference_gives_hand_derived_bet():
  root, action, weights, margin = _reference_search(
    _bet_tables(),
    1,
    _BET_LEGAL,
    np.zeros(3),
    num_players=2,
    payoff="zero_sum",
    num_simulations=4,
    max_considered=2,
  )
  assert margin > 0.1
  np.testing.assert_array_equal(root.child_visits, _BET_VISITS)
  np.testing.assert_allclose(root.value, _BET_ROOT_VALUE)
  np.testing.assert_allclose(root.child_reward[:2] + root.child_value[:2], _BET_Q)
  assert action == 0
  np.testing.assert_allclose(weights, _BET_WEIGHTS, rtol=1e-12)
  np.testing.assert_array_equal(root.children[0].child_visits, [1, 0, 0])


# The hand-built and random comparisons share one compiled search: A = 3,
# C = 4 (slots padded), a batch of 3, identity argmax, deterministic chance.
# Root Dirichlet settings are left at their defaults: the Gumbel root does
# not use them (the hand numbers would differ if it did).
_REF_SIMS, _REF_CONSIDERED = 12, 2
_REF_CONFIG = SearchConfig(
  num_simulations=_REF_SIMS,
  root="gumbel",
  max_num_considered_actions=_REF_CONSIDERED,
  identity_mode="argmax",
  chance_mode="prior_minus_visits",
)


def _pad_outcomes(t, num_outcomes=4):
  """The bet model with C = 4 (two outcomes of probability 0)."""
  t = dict(t)
  extra = num_outcomes - t["chance"].shape[1]
  t["chance"] = np.pad(t["chance"], [(0, 0), (0, extra)], constant_values=-np.inf)
  a = t["policy"].shape[1]
  t["next"] = np.concatenate(
    [t["next"][:, : a + 2], np.zeros((t["next"].shape[0], extra), np.int32)], axis=1
  )
  return t


def test_hand_built_bet_with_chance_node():
  """The JAX search gives the hand-derived numbers (4 simulations, m = 2,
  temperature 0), and with 12 simulations and the Gumbel noise on it matches
  the reference step for step."""
  t = _pad_outcomes(_bet_tables())
  legal = np.array([_BET_LEGAL] * 3)
  out = _run(
    _jnp(t),
    jax.random.PRNGKey(0),
    jnp.ones(3, jnp.int32),
    jnp.asarray(legal),
    0.0,
    num_players=2,
    payoff="zero_sum",
    config=dataclasses.replace(_REF_CONFIG, num_simulations=4),
  )
  tree = out.search_tree
  np.testing.assert_array_equal(tree.children_visits[:, 0, :3], [_BET_VISITS] * 3)
  np.testing.assert_allclose(out.root_value, [_BET_ROOT_VALUE] * 3, rtol=1e-6)
  np.testing.assert_allclose(tree.qvalues(jnp.zeros(3, jnp.int32))[:, :2], [_BET_Q] * 3, rtol=1e-6)
  np.testing.assert_array_equal(out.action, [0, 0, 0])
  np.testing.assert_allclose(out.action_weights, [_BET_WEIGHTS] * 3, rtol=1e-5)
  x = np.asarray(tree.children_index[:, 0, 0])
  np.testing.assert_array_equal(np.asarray(tree.embeddings.kind)[:, x[0]], 1)
  np.testing.assert_array_equal(tree.children_visits[0, x[0]], [1, 0, 0, 0])

  key = jax.random.PRNGKey(5)
  out = _run(
    _jnp(t),
    key,
    jnp.ones(3, jnp.int32),
    jnp.asarray(legal),
    1.0,
    num_players=2,
    payoff="zero_sum",
    config=_REF_CONFIG,
  )
  gumbel = _root_gumbel(key, 3, 3, 1.0)
  _assert_matches_reference(
    out,
    t,
    [1, 1, 1],
    legal,
    gumbel,
    num_players=2,
    payoff="zero_sum",
    num_simulations=_REF_SIMS,
    max_considered=_REF_CONSIDERED,
  )


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
  set_identity(t, 0, num_players + 1)
  return t


@pytest.mark.parametrize("payoff,num_players", [("zero_sum", 2), ("collaborative", 2)])
def test_random_tables_match_reference(payoff, num_players):
  """Random models mixing choice nodes of both players (the opponent's Q
  flipped in zero-sum), chance nodes and terminal nodes, with the Gumbel
  noise on, against the plain-Python reference."""
  num_actions, num_outcomes, batch = 3, 4, 3
  for seed in range(4):
    rng = np.random.default_rng(1000 + seed)
    t = _random_tables(rng, 40, num_actions, num_outcomes, num_players)
    roots = rng.integers(1, 40, batch)
    legal = rng.random((batch, num_actions)) < 0.8
    legal[:, 0] = True
    key = jax.random.PRNGKey(seed)
    out = _run(
      _jnp(t),
      key,
      jnp.asarray(roots),
      jnp.asarray(legal),
      1.0,
      num_players=num_players,
      payoff=payoff,
      config=_REF_CONFIG,
    )
    kinds = np.asarray(out.search_tree.embeddings.kind)
    visited = np.asarray(out.search_tree.node_visits) > 0
    assert (kinds[visited] == 1).any() and (kinds[visited] == 2).any()
    gumbel = _root_gumbel(key, batch, num_actions, 1.0)
    _assert_matches_reference(
      out,
      t,
      roots,
      legal,
      gumbel,
      num_players=num_players,
      payoff=payoff,
      num_simulations=_REF_SIMS,
      max_considered=_REF_CONSIDERED,
    )


# ----------------------------------------------------------------------------
# Settings.


def test_bad_gumbel_settings_raise_clear_errors():
  bad = [
    (dict(root="alphazero"), r"root must be one of \('puct', 'gumbel', 'expectimax'\)"),
    (dict(max_num_considered_actions=0), "max_num_considered_actions"),
    (dict(max_num_considered_actions=2.5), "max_num_considered_actions"),
    (dict(max_num_considered_actions=True), "max_num_considered_actions"),
    (dict(gumbel_scale=-1.0), "gumbel_scale must be a finite number >= 0"),
    (dict(gumbel_scale=float("nan")), "gumbel_scale"),
    (dict(gumbel_scale=float("inf")), "gumbel_scale"),
    (dict(completed_q_value_scale=0.0), "completed_q_value_scale must be a finite number > 0"),
    (dict(completed_q_maxvisit_init=-1.0), "completed_q_maxvisit_init"),
    (dict(completed_q_rescale_values="yes"), "completed_q_rescale_values"),
    (dict(completed_q_use_mixed_value=1), "completed_q_use_mixed_value"),
    (
      dict(root="gumbel", num_simulations=8),
      "num_simulations=8 below max_num_considered_actions=16",
    ),
  ]
  for kwargs, match in bad:
    with pytest.raises(ValueError, match=match):
      SearchConfig(**kwargs)
  # The same knobs are legal where they fit: m <= n, a PUCT root ignores m.
  SearchConfig(root="gumbel", num_simulations=8, max_num_considered_actions=8)
  SearchConfig(
    root="gumbel",
    num_simulations=2,
    max_num_considered_actions=1,
    gumbel_scale=0.0,
    completed_q_maxvisit_init=0.0,
  )
  SearchConfig(root="puct", num_simulations=8)


def _tiny_config(name, extra=()):
  return tiny.tiny_config(name, "train.checkpoint_every=0", "train.total_updates=4", *extra)


def test_config_overrides_select_the_gumbel_root():
  config = _tiny_config(
    "nannon",
    ["search.root=gumbel", "search.max_num_considered_actions=3", "search.gumbel_scale=0.5"],
  )
  assert config.search.root == "gumbel"
  assert config.search.max_num_considered_actions == 3
  assert config.search.gumbel_scale == 0.5
  assert config.to_dict()["search"]["root"] == "gumbel"
  with pytest.raises(ValueError, match="root must be one of"):
    _tiny_config("nannon", ["search.root=gumbell"])
  # Nannon's tiny config searches 3 simulations: m = 16 (mctx's default) does not fit.
  with pytest.raises(ValueError, match="max_num_considered_actions=16"):
    _tiny_config("nannon", ["search.root=gumbel", "search.max_num_considered_actions=16"])


def test_anakin_step_runs_with_the_gumbel_root():
  """One jitted Anakin step on Nannon (chance nodes in self-play and in the
  learned model's search) with the Gumbel root: finite loss, the completed-Q
  policy targets in the buffer are distributions over legal moves."""
  learner = Learner(
    _tiny_config("nannon", ["search.root=gumbel", "search.max_num_considered_actions=2"])
  )
  state = learner.init(jax.random.PRNGKey(0))
  state, metrics = learner.jit_step(state)
  metrics = jax.device_get(metrics)
  assert int(state.update_step) > 0
  assert np.isfinite(metrics.terms["loss"])
  for leaf in jax.tree.leaves(state.params):
    assert np.all(np.isfinite(np.asarray(leaf)))
