"""What a training run prints of its evaluations (`runtime.console`): one
short line each, and a short table at the end; every metric stays in
TensorBoard and `train --json`."""

import envs
from anakin_mz.runtime import console


def _nannon_result():
  """An evaluation as `periodic.evaluate` makes it on Nannon: the match against
  random, the exact evaluator, 34 dynamics tests (42 metrics), and where."""
  out = {
    "eval/vs_random_score_mean": 0.62,
    "eval/vs_random_score_std": 0.78,
    "eval/vs_random_win_rate": 0.81,
    "eval/vs_random_draw_rate": 0.0,
    "eval/vs_random_loss_rate": 0.19,
    "eval/vs_random_mean_length": 27.0,
    "exact/greedy_vs_optimal": 0.45123,
    "exact/greedy_vs_random": 0.81234,
  }
  for metric in ("top_move", "uniform", "top1", "identity_turn", "identity_chance", "chance_tv"):
    for k in range(5):
      out[f"dynamics/{metric}_k{k}"] = 0.5
  out.update({"dynamics/reward_mae_k0": 0.1, "dynamics/reward_mae_k1": 0.1})
  assert sum("/" in k for k in out) >= 40
  out.update(update_step=400, env_steps=25600.0, wall_s=72.4)
  return out


def test_an_evaluation_prints_one_short_line_of_its_headline():
  nannon = envs.make("nannon")
  result = _nannon_result()
  assert console.headline(result, nannon) == {
    "eval/vs_random_score_mean": 0.62,
    "eval/vs_random_win_rate": 0.81,
    "exact/greedy_vs_optimal": 0.45123,
    "exact/greedy_vs_random": 0.81234,
  }
  line = console.eval_line(result, nannon)
  assert line == (
    "[eval] update 400  env steps 25,600  wall 72s  vs random +0.620 (win 0.810)  "
    "exact: greedy_vs_optimal 0.4512, greedy_vs_random 0.8123"
  )
  assert len(line) < 140 and "dynamics" not in line  # the old line: ~880 characters


def test_a_single_player_game_shows_its_score_only():
  catch = envs.make("catch")
  result = {
    "eval/vs_random_score_mean": -0.25,
    "eval/vs_random_win_rate": 0.375,
    "dynamics/top1_k0": 0.9,
    "update_step": 0,
    "env_steps": 0.0,
    "wall_s": 3.0,
  }
  assert console.headline(result, catch) == {"eval/vs_random_score_mean": -0.25}
  assert console.eval_line(result, catch) == "[eval] update 0  env steps 0  wall 3s  score -0.250"


def test_a_run_ends_with_a_short_table():
  table = console.final_table(_nannon_result(), envs.make("nannon"), "TensorBoard (runs/n)")
  assert table.splitlines() == [
    "final evaluation: update 400, 25,600 env steps, 1.2 min",
    "  eval/vs_random_score_mean   +0.620",
    "  eval/vs_random_win_rate      0.810",
    "  exact/greedy_vs_optimal     0.4512",
    "  exact/greedy_vs_random      0.8123",
    "  (36 more metrics in TensorBoard (runs/n))",
  ]
