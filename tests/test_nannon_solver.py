"""Nannon's exact solver: position counts, ranking both ways, value iteration
checked against the env's own rules, exact policy evaluation checked by
simulation, the players, and the max_game_length bound."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from envs import nannon
from envs import nannon_solver as ns
from envs.policy import per_game, random_policy
from anakin_mz.eval import match


@pytest.fixture(scope="module")
def env():
  return envs.make("nannon")


@pytest.fixture(scope="module")
def sol(env):
  return ns.solve(env, cache=False)


def brute_positions(n, k):
  """Every position by direct enumeration: (mine, theirs, home_me, home_opp)."""
  out = []
  for cells in itertools.product((0, 1, 2), repeat=n):
    i, j = cells.count(1), cells.count(2)
    if i > k or j > k:
      continue
    for hm in range(k - i + 1):
      for ho in range(k - j + 1):
        out.append((np.array(cells) == 1, np.array(cells) == 2, hm, ho))
  return out


def test_position_counts():
  assert nannon.num_positions(6, 3) == 2_530
  assert nannon.num_positions(12, 5) == 1_780_776
  for n, k in [(4, 2), (5, 3), (3, 4), (6, 3)]:
    assert nannon.num_positions(n, k) == len(brute_positions(n, k))


@pytest.mark.parametrize("n,k", [(5, 3), (6, 3), (3, 4)])
def test_ranking_is_a_bijection(n, k):
  pos = brute_positions(n, k)
  mine, theirs, hm, ho = (jnp.asarray(np.array(x)) for x in zip(*pos))
  ranks = np.asarray(
    jax.jit(jax.vmap(lambda a, b, c, d: ns.rank_position(a, b, c, d, k)))(mine, theirs, hm, ho)
  )
  num = nannon.num_positions(n, k)
  assert sorted(ranks.tolist()) == list(range(num))
  back = jax.jit(jax.vmap(lambda i: ns.unrank_position(i, n, k)))(jnp.asarray(ranks))
  for got, want in zip(back, (mine, theirs, hm, ho)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_ranking_12_5_both_ways():
  n, k = 12, 5
  num = nannon.num_positions(n, k)
  rng = np.random.default_rng(1)
  idx = np.concatenate([[0, num - 1], rng.integers(0, num, 4000)]).astype(np.int32)
  unrank = jax.jit(jax.vmap(lambda i: ns.unrank_position(i, n, k)))
  rank = jax.jit(jax.vmap(lambda a, b, c, d: ns.rank_position(a, b, c, d, k)))
  mine, theirs, hm, ho = unrank(jnp.asarray(idx))
  assert not np.any(np.asarray(mine) & np.asarray(theirs))
  assert np.all(np.asarray(mine).sum(1) + np.asarray(hm) <= k)
  np.testing.assert_array_equal(np.asarray(rank(mine, theirs, hm, ho)), idx)
  # Random positions -> rank -> unrank gives them back.
  cells = rng.integers(0, 3, (4000, n))
  keep = ((cells == 1).sum(1) <= k) & ((cells == 2).sum(1) <= k)
  cells = cells[keep]
  hm = rng.integers(0, k + 1 - (cells == 1).sum(1))
  ho = rng.integers(0, k + 1 - (cells == 2).sum(1))
  r = rank(jnp.asarray(cells == 1), jnp.asarray(cells == 2), jnp.asarray(hm), jnp.asarray(ho))
  assert np.all((np.asarray(r) >= 0) & (np.asarray(r) < num))
  back = unrank(r)
  for got, want in zip(back, (cells == 1, cells == 2, hm, ho)):
    np.testing.assert_array_equal(np.asarray(got), want)


def env_backup(env, values):
  """T V from the env's own transitions: for every position p and roll r,
  step the env from p's roll node; returns (T V `[N]`, best action `[N, d]`
  (-1 without a decision), Q `[N, d, A]` (-inf for illegal actions))."""
  n, k, d = 6, 3, 6
  num = nannon.num_positions(n, k)
  v = jnp.asarray(values, jnp.float32)

  @jax.jit
  def run(pos):
    s = ns.position_states(env, pos, jnp.zeros_like(pos))

    def per_roll(s, r):
      s1 = env.step(s, r - 1)
      forfeit = s1.current_player == envs.CHANCE

      def per_action(a):
        s2 = env.step(s1, a)
        nxt = ns.state_position(s2, k)
        val = jnp.where(s2.terminated, 1.0, 1.0 - v[nxt])
        return jnp.where(s1.legal_action_mask[a], val, -jnp.inf)

      q = jax.vmap(per_action)(jnp.arange(n + 1))
      fq = 1.0 - v[ns.state_position(s1, k)]
      return jnp.where(forfeit, fq, jnp.max(q)), jnp.where(forfeit, -jnp.inf, q)

    def one(s):
      return jax.vmap(lambda r: per_roll(s, r))(jnp.arange(1, d + 1))

    best, q = jax.vmap(one)(s)
    return best.mean(-1), q

  tv, q = run(jnp.arange(num))
  return np.asarray(tv), np.asarray(q)


def test_solution_satisfies_bellman_by_env_rules(env, sol):
  num = 2530
  assert sol.values.shape == (num,) and sol.policy.shape == (num, 6)
  assert sol.residual < 1e-9
  assert np.all((sol.values >= 0) & (sol.values <= 1))
  t = ns.build_tables(6, 3, 6)
  assert np.all(sol.values[t.lost] == 0)
  tv, q = env_backup(env, sol.values)
  live = ~(t.lost | t.won)
  # float32 successor values in the env-side backup: 1e-6.
  np.testing.assert_allclose(tv[live], sol.values[live], atol=1e-6)
  # The optimal action is a legal maximiser wherever there is a decision.
  dec = t.decision
  assert np.array_equal(dec, (sol.policy >= 0))
  p, r = np.nonzero(dec)
  a = sol.policy[p, r].astype(int)
  assert np.all(np.isfinite(q[p, r, a]))
  np.testing.assert_allclose(q[p, r, a], q[p, r].max(-1), atol=1e-6)


def test_first_mover_and_symmetry(env, sol):
  ev = ns.exact_win_probability(sol.policy, "optimal", env)
  assert abs(ev.win_probability - 0.5) < 1e-9  # a symmetric self-play match
  assert abs(ev.when_starting + ev.when_second - 1.0) < 1e-9
  # The first mover's value from the solver's own values.
  t = ns.build_tables(6, 3, 6)
  s0 = ns.start_position(env)
  q = np.where(t.succ[s0] < 2530, 1.0 - np.concatenate([sol.values, [0.0]])[t.succ[s0]], -np.inf)
  p = np.array([5, 4, 3, 2, 1]) / 15
  np.testing.assert_allclose(ev.when_starting, p @ q.max(-1)[:5], atol=1e-9)
  assert ns.first_mover_win_probability(env) == pytest.approx(ev.when_starting)


def simple_table(t, last):
  """Deterministic non-optimal players: the first (last) legal slot."""
  legal = t.succ < t.num_positions
  slot = (legal.shape[-1] - 1 - np.argmax(legal[..., ::-1], -1)) if last else np.argmax(legal, -1)
  act = np.take_along_axis(
    np.broadcast_to(t.slot_action[:, None, :], legal.shape), slot[..., None], -1
  )[..., 0]
  return np.where(t.decision, act, -1)


def test_exact_evaluation_invariants(env, sol):
  t = ns.build_tables(6, 3, 6)
  first, last = simple_table(t, False), simple_table(t, True)
  for table in (first, last):
    vs_opt = ns.exact_win_probability(table, "optimal", env)
    assert vs_opt.win_probability < 0.5
    assert vs_opt.residual < 1e-9
    # Against itself: exactly even.
    assert abs(ns.exact_win_probability(table, table, env).win_probability - 0.5) < 1e-9
    # The optimal player beats it by as much as it loses.
    back = ns.exact_win_probability(sol.policy, table, env)
    assert back.win_probability == pytest.approx(1 - vs_opt.win_probability, abs=1e-9)
  vs_random = ns.exact_win_probability(sol.policy, "random", env)
  assert 0.5 < vs_random.win_probability < 1.0


def test_evaluation_rejects_bad_tables(env, sol):
  bad = sol.policy.copy()
  p, r = np.argwhere(bad >= 0)[0]
  t = ns.build_tables(6, 3, 6)
  legal = {int(a) for a, s in zip(t.slot_action[p], t.succ[p, r]) if s < 2530}
  bad[p, r] = next(a for a in range(7) if a not in legal)
  with pytest.raises(ValueError, match="illegal entries"):
    ns.exact_win_probability(bad, "random", env)
  with pytest.raises(ValueError, match="shape"):
    ns.exact_win_probability(sol.policy[:10], "random", env)
  with pytest.raises(ValueError, match="opponent must be"):
    ns.exact_win_probability(sol.policy, "expert", env)


def play(env, policy, opponent, key, num_games):
  """`anakin_mz.eval.match.play_match`: `policy` in each seat in half of the
  games. Returns its rewards `[num_games]` and whether any was truncated."""
  res = jax.jit(lambda k: match.play_match(env, policy, opponent, k, num_games))(key)
  return np.asarray(res.score), bool(np.any(res.truncated))


def test_simulated_optimal_vs_random_matches_exact(env, sol):
  games = 2000
  exact = ns.exact_win_probability(sol.policy, "random", env).win_probability
  optimal = per_game(ns.TablePolicy(table=jnp.asarray(sol.policy), checkers=3))
  rewards, truncated = play(env, optimal, random_policy, jax.random.PRNGKey(7), games)
  assert not truncated
  assert set(np.unique(rewards)) <= {-1.0, 1.0}
  wins = np.mean(rewards == 1.0)
  se = np.sqrt(exact * (1 - exact) / games)
  assert abs(wins - exact) < 4 * se, (wins, exact, se)


def test_table_from_fn_and_players(env, sol):
  optimal = ns.optimal_policy(env)
  act = jax.jit(jax.vmap(optimal))
  table = ns.policy_table_from_fn(env, act, batch_size=8192)
  np.testing.assert_array_equal(table, sol.policy)
  states, pos, roll = ns.decision_states(env, first=100, count=300)
  assert states.current_player.shape == (300,)
  assert np.all(np.asarray(states.current_player) == 0)
  np.testing.assert_array_equal(np.asarray(states.game.die), roll)
  a = np.asarray(jax.jit(random_policy)(states, jax.random.PRNGKey(0)))
  assert np.all(np.asarray(states.legal_action_mask)[np.arange(300), a])


def tail_probability(env, turns, policy=None):
  """Exact P(a game lasts more than `turns` turns after the opening move),
  random vs random (or `policy` table vs itself), by propagating the
  distribution over positions."""
  n, k, d = (env.params[x] for x in ("points", "checkers", "die_sides"))
  t = ns.build_tables(n, k, d)
  num = t.num_positions
  legal = t.succ < num
  if policy is not None:  # keep only the policy's move
    chosen = t.slot_action[:, None, :] == np.asarray(policy)[..., None]
    legal &= chosen | ~t.decision[..., None]
  count = legal.sum(-1)
  # The opening: the starter moves m, P(m) proportional to d - m.
  s0 = ns.start_position(env)
  mass = np.zeros(num)
  for m in range(1, d):
    pm = (d - m) / (d * (d - 1) / 2)
    nxt = t.succ[s0, m - 1][legal[s0, m - 1]]
    np.add.at(mass, nxt, pm / len(nxt))
  w = np.where(legal, (1.0 / d) / np.maximum(count, 1)[..., None], 0.0)
  src = np.broadcast_to(np.arange(num)[:, None, None], t.succ.shape)[legal]
  dst, w = t.succ[legal], w[legal]
  forfeit_w = (~legal.any(-1)).sum(-1) / d
  for _ in range(turns):
    mass[t.lost] = 0.0
    new = np.bincount(dst, weights=mass[src] * w, minlength=num)
    new += np.bincount(t.flip, weights=mass * forfeit_w, minlength=num)
    mass = new
  mass[t.lost] = 0.0
  return mass.sum()


def tail_probability_pull(env, turns, policy=None):
  """`tail_probability` by the backward recursion f_t(p) = P(the game goes
  on for t more turns from p), jitted and gather-based: for 12-5-6."""
  n, k, d = (env.params[x] for x in ("points", "checkers", "die_sides"))
  t = ns.build_tables(n, k, d)
  num = t.num_positions
  legal = t.succ < num
  if policy is not None:
    legal &= (t.slot_action[:, None, :] == np.asarray(policy)[..., None]) | ~t.decision[..., None]
  succ = np.where(legal, t.succ, 0)

  @jax.jit
  def run(succ, legal, flip, lost):
    def sweep(f, _):
      nxt = jnp.where(legal, f[succ], 0.0).sum(-1) / jnp.maximum(legal.sum(-1), 1)
      nxt = jnp.where(legal.any(-1), nxt, f[flip][:, None])
      return jnp.where(lost, 0.0, nxt.mean(-1)), None

    f, _ = jax.lax.scan(sweep, jnp.where(lost, 0.0, 1.0), None, length=turns)
    return f

  f = np.asarray(run(succ, legal, t.flip, t.lost))
  s0 = ns.start_position(env)
  total = 0.0
  for m in range(1, d):
    ok = legal[s0, m - 1]
    total += (d - m) / (d * (d - 1) / 2) * f[t.succ[s0, m - 1][ok]].mean()
  return total


def test_max_game_length_is_virtually_never_hit(env, sol):
  # Each turn is at most two transitions (roll, move); the opening roll and
  # the first move are two: truncation needs (L - 2) / 2 more turns.
  turns = (env.max_game_length - 2) // 2
  assert tail_probability(env, turns) < 1e-12
  assert tail_probability(env, turns, sol.policy) < 1e-12
  assert tail_probability(env, 10) > 1e-3  # the computation sees long games


def test_the_estimate_counts_positions_and_prices_the_solve(sol):
  six = ns.estimate(6, 3, 6)
  assert six.positions == 2_530 and six.entries == 2_530 * 6 * 4
  assert sol.iterations / 1.5 <= six.sweeps <= 1.5 * sol.iterations  # the model's sweeps
  assert 1 < six.seconds < 60
  twelve = ns.estimate(12, 5, 6)  # the project's larger configuration: within the limit
  assert twelve.positions == 1_780_776 and twelve.seconds < ns.MAX_ESTIMATED_SECONDS
  assert ns.estimate(12, 6, 6).seconds > ns.MAX_ESTIMATED_SECONDS
  assert ns.estimate(16, 8, 6).seconds > 24 * 3600


def test_solve_nannon_refuses_beyond_the_limit_unless_forced(sol, tmp_path, monkeypatch, capsys):
  from anakin_mz.cli import solve_nannon

  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path))  # nothing cached
  assert solve_nannon.main(["--config", "12-6-6"]) == 2
  out = capsys.readouterr()
  assert out.out.startswith("nannon 12-6-6: 4,203,123 positions; solve estimated at 13.0 min")
  assert out.err == (
    "error: nannon 12-6-6 is estimated to take 13.0 min to solve, beyond the limit of "
    "10.0 min; pass --force to solve it\n"
  )
  monkeypatch.setattr(ns, "MAX_ESTIMATED_SECONDS", 1.0)  # 6-3-6 is beyond it now
  assert solve_nannon.main(["--config", "6-3-6"]) == 2
  assert "pass --force" in capsys.readouterr().err
  assert solve_nannon.main(["--config", "6-3-6", "--force"]) == 0
  assert "optimal vs random: optimal wins" in capsys.readouterr().out
  # Beyond what the solver holds in memory, even forced: an error, no traceback.
  assert solve_nannon.main(["--config", "16-8-6", "--force"]) == 2
  assert "the solver handles at most 20,000,000" in capsys.readouterr().err


def test_cache_round_trip(env, sol, tmp_path, monkeypatch):
  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path))
  first = ns.solve(env, cache=True, refresh=True)
  name = f"nannon_6-3-6_env{nannon.Nannon.version}_solver{ns.SOLVER_VERSION}.npz"
  assert [f.name for f in tmp_path.iterdir()] == [name]
  monkeypatch.setattr(ns, "_SOLVED", {})  # forget this process's solutions
  again = ns.solve(env, cache=True)
  assert again.from_cache and not first.from_cache
  assert again.iterations == first.iterations
  np.testing.assert_array_equal(again.values, first.values)
  np.testing.assert_array_equal(again.policy, sol.policy)


def rewrite_cache(path, **changes):
  with np.load(path) as z:
    fields = {k: z[k] for k in z.files}
  fields.update(changes)
  np.savez(path, **fields)


@pytest.mark.parametrize(
  "damage, message",
  [
    ("truncate", "cannot read"),
    ("garbage", "cannot read"),
    ("flip_value", "checksum"),
    ("solver_version", "solver_version"),
    ("env_version", "env_version"),
    ("config", "config"),
    ("shape", "not int8"),
    ("old_format", "lacks"),
  ],
)
def test_corrupt_or_stale_cache_is_solved_again(env, sol, tmp_path, monkeypatch, damage, message):
  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path))
  ns.solve(env, cache=True, refresh=True)
  (path,) = tmp_path.iterdir()
  if damage == "truncate":
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
  elif damage == "garbage":
    path.write_bytes(b"not a zip file at all")
  elif damage == "flip_value":
    with np.load(path) as z:
      values = z["values"].copy()
    values[17] += 1e-3
    rewrite_cache(path, values=values)
  elif damage in ("solver_version", "env_version"):
    rewrite_cache(path, **{damage: 99})
  elif damage == "config":
    rewrite_cache(path, config=np.array([6, 3, 5]))
  elif damage == "shape":
    with np.load(path) as z:
      rewrite_cache(path, policy=z["policy"][:, :5])
  elif damage == "old_format":  # the file layout before versions and checksums
    with np.load(path) as z:
      np.savez(path, **{k: z[k] for k in ("values", "policy", "residual", "tol", "iterations")})
  with pytest.raises(ns.CacheError, match=message):
    ns._load(str(path), 6, 3, 6)
  monkeypatch.setattr(ns, "_SOLVED", {})
  with pytest.warns(UserWarning, match=message):
    again = ns.solve(env, cache=True)
  assert not again.from_cache
  np.testing.assert_array_equal(again.policy, sol.policy)
  # The bad file was replaced by a good one.
  monkeypatch.setattr(ns, "_SOLVED", {})
  assert ns.solve(env, cache=True).from_cache


def test_cache_of_another_solver_version_is_not_read(env, tmp_path, monkeypatch):
  monkeypatch.setenv("ANAKIN_MZ_CACHE", str(tmp_path))
  ns.solve(env, cache=True, refresh=True)
  monkeypatch.setattr(ns, "SOLVER_VERSION", ns.SOLVER_VERSION + 1)
  monkeypatch.setattr(ns, "_SOLVED", {})
  assert not ns.solve(env, cache=True).from_cache
  assert len(list(tmp_path.iterdir())) == 2  # one file per solver version


@pytest.mark.slow
def test_12_5_6_solution():
  env = envs.make("nannon", points=12, checkers=5)
  sol = ns.solve(env)
  assert sol.values.shape == (1_780_776,)
  assert sol.residual < 1e-9
  ev = ns.exact_win_probability(sol.policy, "optimal", env)
  assert abs(ev.win_probability - 0.5) < 1e-9
  vs_random = ns.exact_win_probability(sol.policy, "random", env)
  optimal = per_game(ns.TablePolicy(table=jnp.asarray(sol.policy), checkers=5))
  games = 2000
  rewards, truncated = play(env, optimal, random_policy, jax.random.PRNGKey(3), games)
  assert not truncated
  exact = vs_random.win_probability
  se = np.sqrt(exact * (1 - exact) / games)
  assert abs(np.mean(rewards == 1.0) - exact) < 4 * se
  small = envs.make("nannon")
  for turns in (5, 30):
    assert tail_probability_pull(small, turns) == pytest.approx(
      tail_probability(small, turns), rel=1e-4
    )
  turns = (env.max_game_length - 2) // 2
  assert tail_probability_pull(env, turns) < 1e-12
  assert tail_probability_pull(env, turns, sol.policy) < 1e-12


def greedy_network(env, seed=0, hidden=(32,)):
  """An untrained network's greedy policy: a cheap, deterministic player that
  is neither optimal nor random (the policy that training scores)."""
  from anakin_mz.core import act
  from anakin_mz.core.networks import Network, NetworkConfig

  net = Network(env, NetworkConfig(kind="mlp", hidden=hidden, latent_dim=16))
  return act.root_greedy(net, net.init(jax.random.PRNGKey(seed)))


def check_exact_against_sampled(env, policy, games, seed):
  """The evaluator's exact scores of `policy` (envs.bots: on-device table,
  policy evaluation) against a match of `games` games against each opponent
  (anakin_mz.eval.match, the agent in both seats): each exact win
  probability lies in the sampled win rate's 99.9% Wilson interval."""
  import envs.bots
  from anakin_mz.eval import stats

  (evaluator,) = envs.bots.evaluators("nannon")
  exact = evaluator.score(env, {"greedy": policy}, jax.random.PRNGKey(0))
  _, optimal = envs.bots.make_bot("optimal", env)
  out = {}
  for i, (name, opponent) in enumerate((("optimal", optimal), ("random", random_policy))):
    rewards, truncated = play(env, policy, opponent, jax.random.PRNGKey(seed + i), games)
    assert not truncated
    wins = int(np.sum(rewards == 1.0))
    lo, hi = stats.wilson_interval(wins, games, confidence=0.999)
    p = exact[f"greedy_vs_{name}"]
    assert lo <= p <= hi, (name, p, wins / games, lo, hi)
    out[name] = (p, wins / games)
  return out


def test_exact_scoring_of_a_network_agrees_with_sampling(env):
  # 6-3-6 (its tables are built for this module anyway), the code path of
  # 12-5-6: the greedy network's move table on device, policy evaluation.
  result = check_exact_against_sampled(env, greedy_network(env), games=1000, seed=11)
  # The untrained network is a real opponent's victim, not a coin flip.
  assert result["optimal"][0] < 0.45


def test_policy_table_on_device_matches_the_policy_state_by_state(env):
  # The table built in one on-device loop (last chunk padded) equals the
  # policy applied to each decision state directly.
  policy = greedy_network(env, seed=3)
  import envs.bots.nannon as bots_nannon

  table = bots_nannon.policy_table(env, policy, jax.random.PRNGKey(0))
  states, pos, roll = ns.decision_states(env)
  direct = np.asarray(jax.jit(policy)(states, jax.random.PRNGKey(0)))
  np.testing.assert_array_equal(table[pos, roll - 1], direct)
  t = ns.build_tables(6, 3, 6)
  assert np.all(table[~t.decision] == -1)
  for batch in (1000, len(pos) + 5):  # ragged chunks; one chunk
    got = ns.policy_table_from_fn(env, lambda s: policy(s, jax.random.PRNGKey(0)), batch)
    np.testing.assert_array_equal(got, table)
  with pytest.raises(ValueError, match="batch_size"):
    ns.policy_table_from_fn(env, lambda s: policy(s, None), 0)


@pytest.mark.slow
def test_12_5_6_exact_scoring_of_a_network_agrees_with_sampling():
  # Solves 12-5-6 once (about 5 CPU-minutes; cached on disk afterwards).
  env = envs.make("nannon", points=12, checkers=5)
  check_exact_against_sampled(env, greedy_network(env, hidden=(64, 64)), games=2000, seed=5)


# Each case compiles its own tabulation (the params are constants of the
# policy): 20 s of CI each. Scale 4 (ties and won positions) and a discount
# of 0.9 run in the fast suite; the plain case is -m slow.
@pytest.mark.parametrize(
  "discount, scale", [pytest.param(1.0, 1.0, marks=pytest.mark.slow), (1.0, 4.0), (0.9, 2.0)]
)
def test_one_ply_table_is_the_policy_applied_state_by_state(env, discount, scale):
  # TD(lambda)'s greedy player (an envs.OnePlyPolicy) tabulated from one
  # value per position equals the policy applied to every decision state:
  # the same move everywhere, ties and wins included.
  from anakin_mz.agents import tdlambda
  from anakin_mz.core.networks import NetworkConfig

  model = tdlambda.ValueModel(env, NetworkConfig(hidden=(32,)), discount=discount)
  params = jax.tree.map(lambda x: scale * x, model.init(jax.random.PRNGKey(7)))
  policy = tdlambda.expectimax_policy(model, params)
  fast = ns.one_ply_table(env, policy, batch_size=1000)
  slow = ns.policy_table_from_fn(env, lambda s: policy(s, jax.random.PRNGKey(0)), 4096)
  np.testing.assert_array_equal(fast, slow)
  # The moves differ between positions (not a constant table).
  t = ns.build_tables(6, 3, 6)
  assert len(np.unique(fast[t.decision])) > 3
  import envs.bots.nannon as bots_nannon

  np.testing.assert_array_equal(bots_nannon.policy_table(env, policy, jax.random.PRNGKey(1)), fast)


def test_observation_decision_inverts_the_decision_states():
  env = envs.make("nannon")
  states, pos, roll = ns.decision_states(env)
  p = env.params
  decode = jax.jit(
    jax.vmap(lambda o: ns.observation_decision(o, p["points"], p["checkers"], p["die_sides"]))
  )
  got_pos, got_roll = decode(states.observation)
  np.testing.assert_array_equal(np.asarray(got_pos), pos)
  np.testing.assert_array_equal(np.asarray(got_roll), roll)
  # A roll node shows no die.
  _, roll0 = decode(ns.position_states(env, pos[:4], np.zeros(4, np.int32)).observation)
  np.testing.assert_array_equal(np.asarray(roll0), 0)


def test_decision_values_are_the_best_moves_of_the_solution():
  env = envs.make("nannon")
  sol = ns.solve(env)
  v = ns.decision_values(env)
  # V(p) is the mean over the rolls of the decision values, where every roll
  # has a decision (no forfeit) and the game is not over.
  full = ~np.isnan(v).any(axis=1)
  np.testing.assert_allclose(v[full].mean(axis=1), sol.values[full], atol=1e-12)
  assert full.sum() > 1000 and np.isnan(v).any()
