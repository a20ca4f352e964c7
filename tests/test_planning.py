"""The planning diagnosis's pieces (exact numbers on table models): the
search's `final_move="q"` and the learned-model lookahead players of
`anakin_mz.eval.planning`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from search_tables import set_identity, table_recurrent, table_root, tables

import envs
from anakin_mz.eval import planning
from anakin_mz.core.search import SearchConfig, ndmz_search


class _TableModel:
  """A learned model read from tables: the observation is the root row."""

  def root(self, params, observation):
    return table_root(params, observation.astype(jnp.int32))

  def recurrent(self, params, rng_key, action, embedding):
    return table_recurrent(params, rng_key, action, embedding)


def _table_search(t, rows, legal, config, temperature, key=0):
  model = _TableModel()
  return ndmz_search(
    t,
    jax.random.PRNGKey(key),
    model.root(t, rows),
    model.recurrent,
    legal,
    num_players=2,
    payoff="zero_sum",
    config=config,
    temperature=temperature,
  )


def _bandit():
  # Root row 1 (player 0 of 2) with two moves into terminal rows: a0 (prior
  # logit 1: p = 0.731) ends with reward 0, a1 (p = 0.269) with 0.1.
  t = tables(8, 2, 2, 2)
  set_identity(t, 1, 0)
  t["next"][1, :2] = [2, 3]
  t["reward"][3] = 0.1
  t["policy"][1] = [1.0, 0.0]
  return jax.tree.map(jnp.asarray, t)


def _search(t, final_move, temperature, batch=1):
  config = SearchConfig(
    num_simulations=4, dirichlet_fraction=0.0, value_bounds=(-1, 1), final_move=final_move
  )
  rows = jnp.ones(batch, jnp.int32)
  return _table_search(t, rows, jnp.ones((batch, 2), bool), config, temperature)


def test_final_move_q_takes_the_best_visited_q_not_the_most_visits():
  # PUCT with Q scaled by [-1, 1] (sqrt(N) * 1.25 * p / (n + 1) + (Q + 1) / 2):
  # sims 1-2 take a0 (1.414 vs 0.836; 1.146 vs 0.976), sim 3 a1 (1.028 vs
  # 1.082), sim 4 a0 (1.109 vs 0.886): visits [3, 1], Q [0, 0.1].
  t = _bandit()
  by_visits = _search(t, "visits", 0.0)
  by_q = _search(t, "q", 0.0)
  np.testing.assert_array_equal(by_visits.search_tree.children_visits[0, 0, :2], [3, 1])
  np.testing.assert_allclose(by_visits.action_weights, [[0.75, 0.25]])
  np.testing.assert_allclose(by_q.action_weights, by_visits.action_weights)
  assert int(by_visits.action[0]) == 0 and int(by_q.action[0]) == 1


def test_final_move_q_still_samples_the_visits_above_temperature_zero():
  t = _bandit()
  sampled = _search(t, "q", 1.0, batch=2000)
  share = float(jnp.mean(sampled.action == 0))
  assert abs(share - 0.75) < 0.04, share  # one standard error ~0.01


def test_final_move_is_checked():
  with pytest.raises(ValueError, match="final_move must be one of"):
    SearchConfig(final_move="value")


def _lookahead_tables():
  # Root row 1 (player 0 of 2). a0 -> row 2, a chance node (value 0.3) whose
  # outcomes (probabilities 1/4, 3/4) lead to rows 4 and 5, the opponent's
  # decisions, valued -0.2 and 0.6 (root mover's view). a1 -> row 3, a
  # terminal node with reward 0.5.
  t = tables(8, 2, 2, 2)
  set_identity(t, 1, 0)
  set_identity(t, 2, 2)
  set_identity(t, 4, 1)
  set_identity(t, 5, 1)
  t["next"][1, :2] = [2, 3]
  t["next"][2, 2:] = [4, 5]
  t["value"][2], t["value"][4], t["value"][5] = 0.3, -0.2, 0.6
  t["value"][3] = 9.0  # a terminal node's value is never read
  t["reward"][3] = 0.5
  t["chance"][2] = [0.0, np.log(3.0)]
  return jax.tree.map(jnp.asarray, t)


@pytest.mark.parametrize(
  "expect_chance, discount, want",
  [
    (False, 1.0, [0.3, 0.5]),
    (True, 1.0, [0.25 * -0.2 + 0.75 * 0.6, 0.5]),
    (False, 0.5, [0.15, 0.5]),
    (True, 0.5, [0.5 * (0.25 * 0.5 * -0.2 + 0.75 * 0.5 * 0.6), 0.5]),
  ],
)
def test_model_action_values_exact(expect_chance, discount, want):
  got = planning.model_action_values(
    _TableModel(),
    _lookahead_tables(),
    jnp.ones(1),
    num_players=2,
    discount=discount,
    expect_chance=expect_chance,
  )
  np.testing.assert_allclose(np.asarray(got), [want], rtol=1e-6)


# ----------------------------------------------------------------------------
# On a tiny Nannon checkpoint: the players through the evaluator, and the
# value head against the exact values.


@pytest.fixture(scope="module")
def nannon_ckpt(tmp_path_factory):
  from test_evaluate import save_tiny

  return save_tiny(tmp_path_factory.mktemp("nannon") / "checkpoints", "nannon")


def test_planning_players_are_scored_exactly_beside_the_search(nannon_ckpt):
  from anakin_mz.eval import report

  names = ["search", "model_1ply", "model_chance", "true_tree"]
  r = report.evaluate_checkpoint(nannon_ckpt, games=2, extra_policies=names)
  got = sorted(k for k in r["exact"] if k.endswith("_vs_optimal"))
  assert got == sorted(f"{n}_vs_optimal" for n in names)
  for n in names:
    assert 0.0 < r["exact"][f"{n}_vs_random"] < 1.0
  assert "learned model, 1 ply + chance" in report.format_report(r)


def test_the_expectimax_search_one_move_deep_plays_model_chance(nannon_ckpt):
  # search.root=expectimax at depth 1 values each legal move as model_chance
  # does (the die one step deeper on the learned model): the same exact score.
  from anakin_mz.eval import report

  r = report.evaluate_checkpoint(
    nannon_ckpt,
    games=2,
    extra_policies=["search", "model_chance"],
    # the die averaged, not the afterstate that nannon.yaml's play search reads
    search_overrides=[
      "root=expectimax",
      "expectimax_depth=1",
      "expectimax_width=3",
      "expectimax_afterstate=false",
    ],
  )
  assert r["exact"]["search_vs_optimal"] == r["exact"]["model_chance_vs_optimal"]
  assert r["simulations"] == 0 and r["search_root"] == "expectimax"
  assert "1-move expectimax on the model" in report.format_report(r)


def test_true_tree_is_alphazeros_search_with_the_agents_network(nannon_ckpt):
  import envs.nannon_solver as ns
  from anakin_mz.core import registry
  from anakin_mz.runtime.restore import load_agent

  agent = load_agent(nannon_ckpt)
  search = agent.config.search
  mine = planning.planning_policies(agent, search, ["true_tree"])["true_tree"]
  az = registry.get("alphazero")
  theirs = az.search_policy(az.model(agent.config, agent.env), agent.params, agent.env, search)
  states, _, _ = ns.decision_states(agent.env, count=256)
  key = jax.random.PRNGKey(3)
  np.testing.assert_array_equal(np.asarray(mine(states, key)), np.asarray(theirs(states, key)))


def test_planning_players_need_a_learned_ndmz_model(tmp_path):
  from test_evaluate import save_tiny

  from anakin_mz.eval import report

  d = save_tiny(tmp_path / "checkpoints", "nannon", overrides=["agent=alphazero"])
  with pytest.raises(ValueError, match="take apart a learned NDMZ model; agent 'alphazero'"):
    report.evaluate_checkpoint(d, games=2, extra_policies=["model_1ply"])


def test_value_error_statistics_exact():
  from anakin_mz.experiments import value_error

  got = value_error.compare(np.array([0.5, -0.5, 0.0, 1.0]), np.array([0.0, -1.0, 0.0, 1.0]))
  assert got.count == 4
  np.testing.assert_allclose(
    [got.mae, got.rmse, got.bias], [0.25, np.sqrt(0.125), 0.25], rtol=1e-12
  )
  np.testing.assert_allclose(got.pearson, np.corrcoef([0.5, -0.5, 0, 1], [0, -1, 0, 1])[0, 1])
  with pytest.raises(ValueError, match="need two"):
    value_error.compare(np.zeros(3), np.zeros(4))


def test_value_error_of_a_checkpoint_on_every_source(nannon_ckpt):
  import envs.nannon_solver as ns
  from anakin_mz.experiments import value_error

  # The tiny checkpoint was saved before any self-play: an empty replay.
  with pytest.raises(ValueError, match="holds 0 decision step"):
    value_error.value_errors(nannon_ckpt, samples=300, sources=["replay"])
  r = value_error.value_errors(nannon_ckpt, samples=60, sources=["positions", "fresh"])
  assert "replay" not in r
  for source in ("positions", "fresh"):
    assert 2 <= r[source]["count"] <= 60, source
    assert -1.0 <= r[source]["pearson"] <= 1.0
  # The exact values are the solver's, read through each observation.
  env = envs.make("nannon")
  states, pos, roll = ns.decision_states(env, count=500)
  want = 2.0 * ns.decision_values(env)[pos, roll - 1] - 1.0
  got = value_error._exact(env, np.asarray(states.observation), ns.decision_values(env))
  np.testing.assert_allclose(got, want)
  # Both key flavours draw the same positions.
  raw = value_error.uniform_observations(env, 40, jax.random.PRNGKey(3))
  typed = value_error.uniform_observations(env, 40, jax.random.key(3))
  np.testing.assert_array_equal(raw, typed)
  with pytest.raises(ValueError, match="is a model file .* holds no replay"):
    value_error.value_errors("nannon", samples=10, sources=["replay"])
  with pytest.raises(ValueError, match="sources must be"):
    value_error.value_errors(nannon_ckpt, sources=["replays"])


def test_value_error_cli_prints_and_records(nannon_ckpt, tmp_path, capsys):
  from anakin_mz.cli import value_error as cli
  from anakin_mz.experiments import records

  out = tmp_path / "r.jsonl"
  argv = ["--checkpoint", nannon_ckpt, "--sources", "positions", "--samples", "50"]
  assert cli.main(argv + ["--records", str(out), "--variant", "tiny"]) == 0
  assert "positions        50" in capsys.readouterr().out
  (record,) = records.read(str(out))
  assert record.experiment == "value_error" and record.variant == "tiny"
  assert record.figures["positions.count"].value == 50.0
  assert set(record.figures) == {
    f"positions.{s}" for s in ("count", "pearson", "mae", "rmse", "bias")
  }
  with pytest.raises(SystemExit) as e:
    cli.main(argv + ["--records", str(out)])
  assert e.value.code == 2
  assert "--records and --variant go together" in capsys.readouterr().err


def test_move_accuracy_exact():
  from anakin_mz.experiments import move_values

  exact = np.array([[0.6, 0.4, np.nan], [0.3, 0.7, 0.5]])  # win probabilities
  values = np.array([[0.1, -0.1, 0.0], [-0.5, 0.5, 0.2]])  # value units
  got = move_values.accuracy(np.array([0, 2]), values, np.array([0, 1]), exact)
  # Value units of exact: [[0.2, -0.2, -], [-0.4, 0.4, 0.0]]; errors
  # [[-0.1, 0.1, -], [-0.1, 0.1, 0.2]]; the top moves are (0, 0) and (1, 1).
  np.testing.assert_allclose(
    [got.agreement, got.regret, got.top_share, got.mae_top, got.bias_top],
    [0.5, 0.1, 0.5, 0.1, 0.0],
    atol=1e-12,
  )
  np.testing.assert_allclose([got.mae_other, got.bias_other], [0.4 / 3, 0.2 / 3], atol=1e-12)
  assert got.decisions == 2
  moves_only = move_values.accuracy(np.array([0, 1]), None, np.array([0, 1]), exact)
  assert moves_only.agreement == 1.0 and np.isnan(moves_only.mae_top)
  with pytest.raises(ValueError, match="illegal move"):
    move_values.accuracy(np.array([2, 1]), None, np.array([0, 1]), exact)


def test_exact_move_values_are_the_solvers_and_the_games_legal_moves():
  import envs.nannon_solver as ns
  from anakin_mz.experiments import move_values

  env = envs.make("nannon")
  states, pos, roll = ns.decision_states(env, count=2000)
  q = move_values.exact_move_values(env, np.asarray(pos), np.asarray(roll))
  np.testing.assert_array_equal(~np.isnan(q), np.asarray(states.legal_action_mask))
  np.testing.assert_allclose(np.nanmax(q, axis=1), ns.decision_values(env)[pos, roll - 1])


def test_move_errors_cli_prints_and_records(nannon_ckpt, tmp_path, capsys):
  from anakin_mz.cli import value_error as cli
  from anakin_mz.experiments import records

  out = tmp_path / "m.jsonl"
  argv = ["--checkpoint", nannon_ckpt, "--moves", "--sources", "positions", "--samples", "40"]
  assert cli.main(argv + ["--records", str(out), "--variant", "tiny"]) == 0
  printed = capsys.readouterr().out
  assert "positions (40 decisions with >= 2 legal moves)" in printed
  (record,) = records.read(str(out))
  figures = record.figures
  assert figures["positions.greedy.top_share"].value == 1.0
  assert "positions.greedy.mae_top" not in figures  # no values: left out, not NaN
  for player in ("search", "model_1ply", "model_chance", "value"):
    assert 0.0 <= figures[f"positions.{player}.regret"].value <= 1.0
  assert figures["positions.value.mae_other"].value > 0.0
  assert cli.main(["--checkpoint", nannon_ckpt, "--moves", "--sources", "replay"]) == 2
  assert "sources must be a non-empty subset of ('positions', 'fresh')" in capsys.readouterr().err


# ----------------------------------------------------------------------------
# The expectimax backup of a grown tree (search.backup).


def test_final_move_expectimax_hand_built():
  # Root row 1 (player 0): a0 (prior logit 0.1) -> row 2, a chance node of
  # value 0.3; a1 -> row 3, terminal with reward 0.5. Two simulations expand
  # both (a0 first by its prior, then a1 by PUCT: 0.65 + 0.66 < 0.5 + 0.84),
  # one visit each: by the visits the tie goes to the prior (a0); the
  # backup values a0 by its chance node's own value (no outcome expanded),
  # 0.3, and a1 by its reward, 0.5.
  t = _lookahead_tables()
  t = dict(t, policy=t["policy"].at[1].set(jnp.array([0.1, 0.0])))
  outs = {}
  for final_move in ("visits", "expectimax"):
    config = SearchConfig(
      num_simulations=2, dirichlet_fraction=0.0, value_bounds=(-1, 1), final_move=final_move
    )
    outs[final_move] = _table_search(t, jnp.ones(1, jnp.int32), jnp.ones((1, 2), bool), config, 0.0)
  np.testing.assert_array_equal(outs["visits"].search_tree.children_visits[0, 0, :2], [1, 1])
  assert int(outs["visits"].action[0]) == 0 and int(outs["expectimax"].action[0]) == 1
  from anakin_mz.core.search.backup import expectimax_root_q

  q = expectimax_root_q(
    outs["visits"].search_tree, num_actions=2, num_outcomes=2, flip_opponents=True
  )
  np.testing.assert_allclose(np.asarray(q), [[0.3, 0.5]], rtol=1e-6)


@pytest.mark.parametrize("discount", [1.0, 0.5])
def test_chance_value_expected_backs_up_the_dice_one_step_deeper(discount):
  # The tables of test_final_move_expectimax_hand_built: two simulations
  # expand a0's chance node and a1's terminal node once each. With
  # chance_value "head" the chance node backs up its own value (0.3); with
  # "expected", the chance policy's expectation of its outcomes' values
  # (0.25 * -0.2 + 0.75 * 0.6 = 0.4 at discount 1), and the root Q of both
  # moves is then model_1ply's with the die averaged (`model_chance`).
  t = _lookahead_tables()
  t = dict(t, policy=t["policy"].at[1].set(jnp.array([0.1, 0.0])))
  q = {}
  for chance_value in ("head", "expected"):
    config = SearchConfig(
      num_simulations=2,
      dirichlet_fraction=0.0,
      value_bounds=(-1, 1),
      discount=discount,
      chance_value=chance_value,
    )
    out = _table_search(t, jnp.ones(1, jnp.int32), jnp.ones((1, 2), bool), config, 0.0)
    np.testing.assert_array_equal(out.search_tree.children_visits[0, 0, :2], [1, 1])
    q[chance_value] = np.asarray(out.search_tree.qvalues(jnp.zeros(1, jnp.int32)))[:, :2]
  np.testing.assert_allclose(q["head"], [[discount * 0.3, 0.5]], rtol=1e-6)
  want = planning.model_action_values(
    _TableModel(), t, jnp.ones(1), num_players=2, discount=discount, expect_chance=True
  )
  np.testing.assert_allclose(q["expected"], np.asarray(want), rtol=1e-6)
  np.testing.assert_allclose(
    q["expected"][0, 0], discount * discount * (0.25 * -0.2 + 0.75 * 0.6), rtol=1e-6
  )


def test_chance_value_is_checked():
  with pytest.raises(ValueError, match="chance_value must be one of"):
    SearchConfig(chance_value="mean")
  with pytest.raises(ValueError, match="tree 'paper' backs up the head's values"):
    SearchConfig(tree="paper", chance_value="expected")


def _reference_backup(tree, b, i, num_actions, num_outcomes):
  """The module's rule, recursively, on batch row b of a grown tree."""
  kind = int(tree.embeddings.kind[b, i])
  raw = float(tree.raw_values[b, i])
  if kind == 2:
    return 0.0
  edges = {}
  for slot in range(tree.num_actions):
    child = int(tree.children_index[b, i, slot])
    if child >= 0:
      sub = _reference_backup(tree, b, child, num_actions, num_outcomes)
      edges[slot] = (
        float(tree.children_rewards[b, i, slot]) + float(tree.children_discounts[b, i, slot]) * sub
      )
  if kind == 1:
    logits = np.asarray(tree.children_prior_logits[b, i, :num_outcomes], np.float64)
    p = np.exp(logits - logits.max())
    p /= p.sum()
    seen = sum(p[c] for c in edges if c < num_outcomes)
    return sum(p[c] * v for c, v in edges.items() if c < num_outcomes) + (1 - seen) * raw
  sign = -1.0 if int(tree.embeddings.player[b, i]) != 0 else 1.0
  mover = [sign * v for c, v in edges.items() if c < num_actions]
  return sign * max(mover + [sign * raw])


def _random_tree(seed, key):
  """A 24-simulation search from six roots of random tables (3 actions, 4
  outcomes, 2 players, discount 0.9): trees with choice, chance and
  terminal nodes to back up."""
  from test_search import _random_tables

  t = jax.tree.map(jnp.asarray, _random_tables(np.random.default_rng(seed), 40, 3, 4, 2))
  rows = jnp.arange(1, 7, dtype=jnp.int32)
  config = SearchConfig(num_simulations=24, dirichlet_fraction=0.0, discount=0.9)
  return _table_search(t, rows, jnp.ones((6, 3), bool), config, 0.0, key=key)


def test_expectimax_backup_matches_a_recursive_reference():
  from anakin_mz.core.search.backup import expectimax_values

  out = _random_tree(4, 1)
  tree = jax.device_get(out.search_tree)
  got = np.asarray(
    expectimax_values(out.search_tree, num_actions=3, num_outcomes=4, flip_opponents=True)
  )
  # Trees worth backing up: several root moves, chance and choice nodes.
  assert ((tree.children_index[:, 0] >= 0).sum(axis=1) >= 2).sum() >= 3
  assert {0, 1, 2} <= set(np.unique(tree.embeddings.kind[tree.node_visits > 0]))
  for b in range(6):
    for i in range(tree.node_values.shape[1]):
      if tree.node_visits[b, i] > 0:
        want = _reference_backup(tree, b, i, 3, 4)
        np.testing.assert_allclose(got[b, i], want, rtol=1e-5, atol=1e-6)


def test_the_mean_backup_gives_back_mctx_node_values():
  # backup_values with the mean at both kinds of node is MCTS's own backup:
  # it recomputes every node value the search left, on random trees.
  from anakin_mz.core.search.backup import backup_values

  tree = _random_tree(5, 2).search_tree
  got = backup_values(
    tree, num_actions=3, num_outcomes=4, flip_opponents=True, choice="mean", chance="mean"
  )
  exists = np.asarray(tree.node_visits) > 0
  assert {0, 1, 2} <= set(np.unique(np.asarray(tree.embeddings.kind)[exists]))
  np.testing.assert_allclose(
    np.asarray(got)[exists], np.asarray(tree.node_values)[exists], rtol=1e-5, atol=1e-6
  )
  with pytest.raises(ValueError, match="backup rules must be"):
    backup_values(tree, num_actions=3, num_outcomes=4, flip_opponents=True, choice="min")


@pytest.mark.parametrize("root", ["puct", "gumbel"])
def test_backup_expectation_weighs_the_dice_by_probability_not_visits(root):
  # The tables of test_model_action_values_exact with a0 the only legal
  # move and the outcome probabilities 0.4 and 0.6: three simulations expand
  # a0's chance node (value 0.3), then its likelier outcome (0.6 - 0 > 0.4,
  # value 0.6), then the other (0.4 > 0.6 - 1/2, value -0.2). MCTS's mean
  # gives a0 the mean of the three backups, (0.3 + 0.6 - 0.2) / 3; the
  # expectation weighs the outcomes by their probabilities, 0.4 * -0.2 +
  # 0.6 * 0.6.
  from anakin_mz.core.search.backup import with_expected_chance

  t = _lookahead_tables()
  t = dict(t, chance=t["chance"].at[2].set(jnp.array([0.0, np.log(1.5)])))
  legal = jnp.array([[True, False]])
  kw = dict(num_simulations=3, dirichlet_fraction=0.0, value_bounds=(-1, 1))
  kw.update(chance_mode="prior_minus_visits", root=root, max_num_considered_actions=1)
  out = {}
  for backup in ("mean", "expectation"):
    final_move = "q" if root == "puct" else "visits"
    config = SearchConfig(**kw, final_move=final_move, backup=backup)
    out[backup] = _table_search(t, jnp.ones(1, jnp.int32), legal, config, 0.0)
  tree = out["mean"].search_tree
  np.testing.assert_array_equal(np.asarray(tree.children_visits[0, 0, :2]), [3, 0])
  root_q = lambda tr: float(tr.qvalues(jnp.zeros(1, jnp.int32))[0, 0])
  np.testing.assert_allclose(root_q(tree), (0.3 + 0.6 - 0.2) / 3, rtol=1e-6)
  expected = with_expected_chance(tree, num_actions=2, num_outcomes=2)
  np.testing.assert_allclose(root_q(expected), 0.4 * -0.2 + 0.6 * 0.6, rtol=1e-6)
  # The tree and the move are the backup's choice only where it reads Q.
  assert int(out["expectation"].action[0]) == 0
  if root == "gumbel":
    # One legal move: the target is all on it either way; the chance node's
    # Q reaches the target through sigma only with two or more moves.
    np.testing.assert_allclose(np.asarray(out["expectation"].action_weights[0]), [1.0, 0.0])


def test_backup_is_checked():
  with pytest.raises(ValueError, match="backup must be one of"):
    SearchConfig(backup="max")
  with pytest.raises(ValueError, match="does not read: use final_move=q or root=gumbel"):
    SearchConfig(backup="expectation")
  SearchConfig(backup="expectation", final_move="q")
  SearchConfig(backup="expectation", root="gumbel", num_simulations=16)
