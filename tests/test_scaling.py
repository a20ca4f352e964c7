"""Sizing runs to the hardware (`anakin_mz.runtime.scaling`), the kernel-chain count
of a compiled step (`profiling.sequential_ops`), `--devices auto`
(`run.fit_devices`) and scripts/benchmark_scale.py."""

import json
import os

import jax
import jax.numpy as jnp
import pytest
import tiny

from anakin_mz.runtime import run, scaling
from anakin_mz.experiments.profiling import sequential_ops

ROOT = os.path.join(os.path.dirname(__file__), "..")


def test_scale_keeps_updates_per_step_and_replay_ratio():
  cfg = tiny.tiny_config("nannon")
  tc = cfg.train
  big = scaling.scale(cfg, tc.num_envs * 16)
  bt = big.train
  assert bt.num_envs == tc.num_envs * 16 and bt.batch_size == tc.batch_size * 16
  transitions = lambda t: t.rollout_length * t.num_envs
  assert bt.updates_per_chunk(transitions(bt)) == tc.updates_per_chunk(transitions(tc))
  assert (bt.rollout_length, bt.replay_capacity, bt.replay_ratio) == (
    tc.rollout_length,
    tc.replay_capacity,
    tc.replay_ratio,
  )
  # sqrt of the batch's growth, capped at 4x.
  assert bt.learning_rate == pytest.approx(tc.learning_rate * 4.0)
  assert scaling.scale(cfg, tc.num_envs * 4).train.learning_rate == pytest.approx(
    tc.learning_rate * 2.0
  )
  assert scaling.scale(cfg, tc.num_envs) == cfg
  odd = tiny.tiny_config("nannon", "train.batch_size=6")  # 4 lanes, 6 rows
  assert scaling.scale(odd, 2).train.batch_size == 3
  with pytest.raises(ValueError, match="3 lanes give a batch of 4.5 rows"):
    scaling.scale(odd, 3)
  with pytest.raises(ValueError, match="lanes must be >= 1"):
    scaling.scale(cfg, 0)


def test_presets():
  cfg = tiny.tiny_config("nannon")
  assert scaling.preset(cfg, "cpu", 8) == cfg
  acc = scaling.preset(cfg, "accelerator", 2)
  assert acc.train.num_envs == 2048 and acc.train.batch_size == 4096
  # per-device: the config's own lanes and batch on each device, the
  # learning rate scaled with the batch's square root.
  per = scaling.preset(cfg, "per-device", 2)
  assert (per.train.num_envs, per.train.batch_size) == (8, 16)
  assert per.train.learning_rate == pytest.approx(cfg.train.learning_rate * 2**0.5)
  assert scaling.preset(cfg, "per-device", 1) == cfg
  with pytest.raises(ValueError, match="unknown preset 'gpu'; presets: cpu, per-device, accel"):
    scaling.preset(cfg, "gpu", 1)


def test_a_resumed_run_keeps_the_sizes_of_its_checkpoint():
  cfg = tiny.tiny_config("nannon")  # 4 lanes, batch 8
  on_two = scaling.preset(cfg, "per-device", 2)
  # Resumed on one device, the run sized on two continues with its own sizes.
  assert scaling.resumed(cfg, on_two.train.num_envs) == on_two
  assert scaling.resumed(cfg, cfg.train.num_envs) == cfg
  odd = tiny.tiny_config("nannon", "train.batch_size=6")  # 4 lanes, 6 rows
  with pytest.raises(ValueError, match="made with 3 lanes, which this config .4 lanes. does"):
    scaling.resumed(odd, 3)


def test_auto_devices_fit_the_sizes():
  cfg = tiny.tiny_config("nannon")  # 4 lanes, batch 8
  assert run.fit_devices(8, cfg) == 4 and run.fit_devices(2, cfg) == 2
  assert run.fit_devices(3, cfg) == 2 and run.fit_devices(1, cfg) == 1
  wide = tiny.tiny_config("nannon", "train.num_envs=12", "train.batch_size=24")
  assert run.fit_devices(8, wide) == 6
  # Reanalysed rows must split too: 6 of 24 rows.
  assert (
    run.fit_devices(
      8,
      tiny.tiny_config(
        "nannon", "train.num_envs=12", "train.batch_size=24", "train.reanalyse_fraction=0.25"
      ),
    )
    == 6
  )
  assert (
    run.fit_devices(
      8,
      tiny.tiny_config(
        "nannon", "train.num_envs=12", "train.batch_size=24", "train.reanalyse_fraction=0.125"
      ),
    )
    == 3
  )


def _ops(fn, *args, **kw):
  return sequential_ops(jax.jit(fn).lower(*args).compile().as_text(), **kw)


def test_sequential_ops_count_loop_bodies_times_trips():
  x = jnp.ones(3)

  def fori(n):
    return lambda x: jax.lax.fori_loop(0, n, lambda i, y: jnp.sin(y) * 2 + i, x)

  # Known trip counts: the count grows by the body's size per trip.
  a, b, c = (_ops(fori(n), x) for n in (5, 10, 20))
  assert a.unknown_loops == b.unknown_loops == c.unknown_loops == 0
  per_trip = (b.total - a.total) / 5
  assert per_trip >= 1 and c.total - b.total == 10 * per_trip

  # A data-dependent while loop: one trip unless the caller says more.
  def while_(y):
    return jax.lax.while_loop(lambda z: z.sum() < 100, lambda z: z * 2 + jnp.cos(z), y)

  one, four = _ops(while_, x), _ops(while_, x, outer_trips=4)
  assert one.unknown_loops == four.unknown_loops == 1
  body = (four.total - one.total) / 3
  assert body >= 1 and _ops(while_, x, outer_trips=7).total == one.total + 6 * body


def test_benchmark_scale_writes_rows(tmp_path):
  out = tmp_path / "scale.json"
  proc = tiny.run_script(
    "benchmark_scale",
    "--env=catch",
    "--lanes",
    "8",  # one setting (each compiles the step; `scale` has its own tests)
    "--repeats=1",
    f"--json={out}",
    *tiny.TINY,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  rows = json.loads(out.read_text())
  assert [r["lanes"] for r in rows] == [8] and [r["batch_size"] for r in rows] == [16]
  for r in rows:
    assert r["devices"] == 1 and r["env_steps_per_s"] > 0 and r["updates_per_s"] > 0
    assert r["sequential_ops"] > 100 and r["iterations"] >= 1
  assert "env steps/s" in proc.stdout and "seq ops" in proc.stdout


@pytest.mark.slow  # the study's step compiles too
def test_benchmark_scale_sums_the_seeds_of_one_program(tmp_path):
  out = tmp_path / "scale.json"
  args = ["--env=catch", "--lanes", "8", "--seeds", "1", "2", "--repeats=1", f"--json={out}"]
  proc = tiny.run_script("benchmark_scale", *args, *tiny.TINY, timeout=900)
  assert proc.returncode == 0, proc.stdout + proc.stderr
  rows = json.loads(out.read_text())
  assert [(r["lanes"], r["seeds"], r["layout"]) for r in rows] == [(8, 1, ""), (8, 2, "lanes")]
  assert all(r["env_steps_per_s"] > 0 and r["sequential_ops"] > 100 for r in rows)
  assert "vs 1 seed" in proc.stdout


def test_benchmark_scale_bad_seeds_is_a_clear_error():
  proc = tiny.run_script("benchmark_scale", "--env=catch", "--lanes", "8", "--seeds", "0")
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
  assert "--lanes, --seeds and --repeats must be >= 1" in proc.stderr, proc.stderr


def test_benchmark_scale_seeds_that_do_not_divide_over_the_devices_are_a_clear_error():
  args = ["--env=catch", "--lanes", "8", "--seeds", "3", "--devices=2", "--seed-layout", "seeds"]
  proc = tiny.run_script("benchmark_scale", *args, timeout=300)
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
  assert "3 seeds do not divide over 2 devices; use 1 or 3 devices" in proc.stderr, proc.stderr


def test_benchmark_scale_bad_lanes_is_a_clear_error():
  # Catch's config: 32 lanes, batch 128; 3 lanes would be 12 rows, 5 lanes 20, but
  # batch 100 over 32 lanes makes 3 lanes 9.375 rows.
  proc = tiny.run_script(
    "benchmark_scale", "--env=catch", "train.batch_size=100", "--lanes", "3", timeout=300
  )
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
  assert "error: 3 lanes give a batch of 9.375 rows" in proc.stderr, proc.stderr


@pytest.mark.slow  # four compilations of the step: a few minutes on a 2-core CPU
def test_benchmark_devices_prints_every_setting_against_the_pinned_core():
  proc = tiny.run_script(
    "benchmark_devices",
    "--env=catch",
    "--devices",
    "2",
    "--rounds=1",
    "--repeats=1",
    "--ceiling",
    *tiny.TINY,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  lines = proc.stdout.splitlines()
  assert lines[0].startswith("catch, --preset per-device: medians of 1 processes x 1 steps")
  names = [line.split("  ")[0] for line in lines[2:]]
  cores = len(os.sched_getaffinity(0))
  assert names == [
    "1 device, 1 core (taskset -c 0)",
    "2 device(s), all cores" + (" (auto)" if cores == 2 else ""),
    f"{cores} processes, 1 pinned core each",
  ]
  assert lines[2].rstrip().endswith("1.00x")


def test_benchmark_devices_bad_preset_is_a_clear_error():
  proc = tiny.run_script("benchmark_devices", "--env=catch", "--preset=gpu", timeout=120)
  assert proc.returncode == 2 and "unknown preset 'gpu'; presets: cpu, per-device" in proc.stderr


def test_benchmark_devices_unknown_env_is_a_clear_error():
  proc = tiny.run_script("benchmark_devices", "--env=chess", timeout=120)
  assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
  assert "unknown env 'chess'; registered envs: " in proc.stderr and "nannon" in proc.stderr
