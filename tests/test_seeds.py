"""A study of several seeds as one program (`runtime.seeds`, issue 64): seeds
{0, 1} with a leading seed axis make the two single-seed runs (params and
losses to float rounding), on 1 device through a resume mid-run, and on 2
devices in both layouts, each seed's lanes split over them and whole seeds
on each, through a resume from one layout in the other (-m slow: two
compilations of their own); each seed's directory is an ordinary run's; bad
seeds and bad layouts are one line.

The single runs use test_anakin's tiny Catch config (the same compiled
step, shared through the session's XLA cache); the study adds one
compilation per device count."""

import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest
import tiny

from anakin_mz import config as config_lib
from anakin_mz.runtime import checkpoint as ckpt
from anakin_mz.core import registry
from anakin_mz.runtime import restore, run, seeds

ROOT = os.path.join(os.path.dirname(__file__), "..")

# One xdist worker runs the module (`--dist loadgroup`), so the single runs
# (`single_runs`) are made once and the CLI's study finds the study's step
# compiled in the XLA cache.
pytestmark = pytest.mark.xdist_group("seeds")

SEEDS = (0, 1)
# test_anakin's Catch step (and test_robustness's): one compilation.
EXTRA = ("train.checkpoint_every=0", tiny.FIXED_SPAN, "train.total_updates=4")


def _config(*extra):
  return tiny.tiny_config("catch", *EXTRA, *extra)


def _study():
  return _config(f"train.seeds=[{','.join(map(str, SEEDS))}]")


@pytest.fixture(scope="module")
def single_runs(tmp_path_factory):
  """The uninterrupted 8-update single runs of seeds 0 and 1 (1 device):
  their params (host), per-step losses and logdir (a checkpoint at 8)."""
  out = {}
  for s in SEEDS:
    logdir = tmp_path_factory.mktemp(f"single{s}")
    result = run.train(_config(f"seed={s}"), logdir=str(logdir), max_updates=8, progress=False)
    out[s] = (jax.device_get(result.state.params), [r["loss"] for r in result.history], logdir)
  return out


def _assert_close(params, losses, want_params, want_losses, *_):
  np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(want_params), strict=True):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)


def test_a_study_is_its_seeds_runs_through_a_resume(tmp_path, single_runs):
  """4 updates, a checkpoint per seed, a resume to 8: each seed's params and
  losses are its single run's; each seed's directory is a run's. Then a
  study whose seed 0 is its single run's directory (at update 8) and seed 1
  at update 4: seed 0 stays at its budget while seed 1 steps to it."""
  cfg, logdir = _study(), tmp_path / "study"
  first = run.train_seeds(cfg, logdir=str(logdir), max_updates=4, progress=False)
  assert [r.saved_step for r in first] == [4, 4]
  with pytest.raises(ValueError, match="pass --resume"):
    run.train_seeds(cfg, logdir=str(logdir), max_updates=8, progress=False)
  second = run.train_seeds(cfg, logdir=str(logdir), resume=True, max_updates=8, progress=False)
  for s, a, b in zip(SEEDS, first, second):
    assert b.checkpoint_dir == str(logdir / f"seed{s}" / "checkpoints")
    losses = [r["loss"] for r in a.history + b.history]
    _assert_close(b.state.params, losses, *single_runs[s])
    assert ckpt.steps(b.checkpoint_dir) == (4, 8)
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(logdir / f"seed{s}"))
    # The seed's checkpoint is its own run's: its config, read as any run's.
    meta = ckpt.load_metadata(b.checkpoint_dir)
    assert meta["config"]["seed"] == s and meta["config"]["train"]["seeds"] == []
  agent = restore.load_agent(str(logdir / "seed1"))
  _assert_close(agent.params, [], single_runs[1][0], [])

  mixed = tmp_path / "mixed"
  shutil.copytree(single_runs[0][2], mixed / "seed0")
  shutil.copytree(logdir / "seed1", mixed / "seed1")
  shutil.rmtree(mixed / "seed1" / "checkpoints" / "8")
  third = run.train_seeds(cfg, logdir=str(mixed), resume=True, max_updates=8, progress=False)
  assert [len(r.history) for r in third] == [0, 1]
  assert [int(r.state.update_step) for r in third] == [8, 8]
  for s, r in zip(SEEDS, third):
    _assert_close(r.state.params, [], single_runs[s][0], [])
  assert third[1].history[0]["loss"] == pytest.approx(single_runs[1][1][1], rel=1e-5)


# argv: logdir, out.npz, overrides. On 2 devices, trains the study (seeds
# 0, 1) to 4 updates with each seed's lanes split over the devices
# (`lanes`), resumes it to 8 with whole seeds on each device (`seeds`), and
# trains a fresh `seeds` study to 8. Saves each study's params as
# "<study>/<leaf>"; prints one JSON line: devices, each study's losses per
# seed, and for each layout its compiled step's first state spec and the
# replica groups of its collectives.
WORKER = r"""
import json, os, re, sys
from anakin_mz.runtime import host
host.configure(2)
import jax, numpy as np
import anakin_mz.agents  # registers them, as the command line does
sys.path.insert(0, "tests")
import tiny
from anakin_mz.runtime import run, step_cache
logdir, out, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
kinds = "all-gather|all-to-all|collective-permute|reduce-scatter|all-reduce|collective-broadcast"
groups = "(?:" + kinds + r")(?:-start)?\(.*?replica_groups=(\{\S*?\}\})"
got = {"devices": jax.device_count(), "loss": {}, "spec": {}, "groups": {}}
arrays = {}
def study(name, layout, updates, resume=False):
  cfg = tiny.tiny_config("catch", *extra, f"train.seed_layout={layout}")
  where = os.path.join(logdir, name)
  results = run.train_seeds(cfg, logdir=where, max_updates=updates, resume=resume, progress=False)
  step = next(reversed(step_cache.STEPS.values()))  # the step it just ran
  got["spec"][layout] = list(jax.tree.leaves(step.input_shardings[0][0])[0].spec)
  got["groups"][layout] = re.findall(groups, step.as_text())
  got["loss"].setdefault(name, [[] for _ in results])
  for i, r in enumerate(results):
    got["loss"][name][i] += [row["loss"] for row in r.history]
    for j, x in enumerate(jax.tree.leaves(jax.device_get(r.state.params))):
      arrays[f"{name}/{i}/{j}"] = x
study("resumed", "lanes", 4)
study("resumed", "seeds", 8, resume=True)
study("fresh", "seeds", 8)
np.savez(out, **arrays)
print(json.dumps(got))
"""


# Two compilations of the study's step, one per layout (~85 s each on a
# loaded 2-core host with a cold XLA cache, ~30 s warm).
@pytest.mark.slow
def test_a_study_on_two_devices_is_its_seeds_runs_in_either_layout(tmp_path, single_runs):
  """Seeds 0, 1 on 2 devices: 4 updates with each seed's lanes split over
  the devices, resumed to 8 with whole seeds on each (the checkpoints are
  the seeds' own, in any layout), and 8 updates with whole seeds from the
  start, each the two single runs. The `seeds` layout's step splits the
  seed axis and no collective of it spans two devices."""
  env = tiny.cpu_env()
  env.pop("XLA_FLAGS", None)
  out = tmp_path / "params.npz"
  args = [str(tmp_path), str(out), *EXTRA, "train.checkpoint_every=4", "train.seeds=[0,1]"]
  proc = subprocess.run(
    [sys.executable, "-c", WORKER, *args],
    cwd=ROOT,
    env=env,
    capture_output=True,
    text=True,
    timeout=900,
  )
  assert proc.returncode == 0, proc.stdout + proc.stderr
  got = json.loads(proc.stdout.strip().splitlines()[-1])
  assert got["devices"] == 2
  assert got["spec"] == {"lanes": [None, "data"], "seeds": ["seeds", "data"]}
  assert got["groups"]["lanes"] and set(got["groups"]["lanes"]) == {"{{0,1}}"}
  assert got["groups"]["seeds"] and set(got["groups"]["seeds"]) == {"{{0},{1}}"}
  n = len(jax.tree.leaves(single_runs[0][0]))
  with np.load(out) as f:
    for name in ("resumed", "fresh"):
      for i, s in enumerate(SEEDS):
        want_params, want_losses, _ = single_runs[s]
        leaves = [f[f"{name}/{i}/{j}"] for j in range(n)]
        _assert_close(leaves, got["loss"][name][i], jax.tree.leaves(want_params), want_losses)


def test_a_study_state_has_the_seed_axis_in_front():
  """The state carries `[S, ...]`; the lanes stay split as the learner's
  (the seed axis never is)."""
  study = seeds.SeedAxis(registry.make_learner(_study()), SEEDS)
  state = jax.eval_shape(study.init_run, SEEDS)
  inner = jax.eval_shape(study.learner.init, jax.random.PRNGKey(0))
  for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(inner), strict=True):
    assert a.shape == (2, *b.shape)
  is_spec = lambda x: isinstance(x, jax.sharding.PartitionSpec)  # noqa: E731
  ours = jax.tree.leaves(study.specs(state), is_leaf=is_spec)
  theirs = jax.tree.leaves(study.learner.specs(inner), is_leaf=is_spec)
  assert ours == [jax.sharding.PartitionSpec(None, *spec) for spec in theirs]
  assert any("data" in spec for spec in ours)
  with pytest.raises(ValueError, match=r"distinct seeds >= 0, got \[1, 1\]"):
    seeds.SeedAxis(study.learner, (1, 1))


def test_the_seed_layouts_and_their_errors():
  """`auto` takes whole seeds per device where the seeds divide over the
  devices, else splits each seed's lanes (and keeps one device's program
  the single run's); `seeds` where they do not divide, and a layout not
  known, are one line naming what is valid. The `seeds` layout's state
  splits the seed axis over a ("seeds", "data") mesh, the learner's specs
  behind it, with each device's seeds' own metrics; on several devices its
  learner must be on one. (Shapes only: the 2-device runs are -m slow.)"""
  choose = seeds.choose_layout
  assert [choose("auto", s, d).name for s, d in [(2, 1), (2, 2), (4, 2), (3, 2)]] == [
    "lanes",
    "seeds",
    "seeds",
    "lanes",
  ]
  assert choose("lanes", 2, 2).name == "lanes" and choose("seeds", 2, 1).name == "seeds"
  assert choose("auto", 4, 2).line().startswith("seed layout: seeds (each of 2 devices holds 2")
  with pytest.raises(ValueError, match=r"3 seeds do not divide over 2 devices; use 1 or 3 devices"):
    choose("seeds", 3, 2)
  with pytest.raises(ValueError, match="6 seeds do not divide over 4 devices; use 1, 2, 3 or 6"):
    choose("seeds", 6, 4)
  assert choose("auto", 2, 4, num_processes=2).name == "lanes"
  with pytest.raises(ValueError, match="seed_layout=seeds runs in one process, not 2"):
    choose("seeds", 2, 2, num_processes=2)
  for bad in (lambda: choose("diagonal", 2, 2), lambda: _config("train.seed_layout=diagonal")):
    with pytest.raises(ValueError, match="seed_layout must be one of auto, seeds, lanes, got 'd"):
      bad()
  three = _config("train.seeds=[0,1,2]", "train.seed_layout=seeds")
  assert run.fit_devices(4, three) == 3 and run.fit_devices(4, _study()) == 4

  learner = registry.make_learner(_study())
  study = seeds.SeedAxis(learner, SEEDS, devices=jax.devices()[:1])
  assert study.mesh.axis_names == ("seeds", "data") and study.layout.name == "seeds"
  state = jax.eval_shape(study.init_run, SEEDS)
  is_spec = lambda x: isinstance(x, jax.sharding.PartitionSpec)  # noqa: E731
  inner = learner.specs(jax.eval_shape(learner.init, jax.random.PRNGKey(0)))
  assert jax.tree.leaves(study.specs(state), is_leaf=is_spec) == [
    jax.sharding.PartitionSpec("seeds", *spec) for spec in jax.tree.leaves(inner, is_leaf=is_spec)
  ]
  assert study.metrics_spec == jax.sharding.PartitionSpec("seeds")
  assert seeds.SeedAxis(learner, SEEDS).metrics_spec == jax.sharding.PartitionSpec()
  wide = type("Wide", (), {"mesh": type("FakeMesh", (), {"size": 2})()})()
  with pytest.raises(ValueError, match="the learner's mesh must be one device, got 2"):
    seeds.SeedAxis(wide, SEEDS, devices=jax.devices()[:1])


def test_the_cli_trains_a_study_into_one_directory_per_seed(tmp_path, capsys):
  """`anakin-mz train --seeds 0 1`: each seed's checkpoints, TensorBoard
  scalars and train.json under <logdir>/seed<S>. In this process (JAX has
  one CPU device here: --devices=1), so the study's step of the test above
  is reused, not traced and loaded again in a fresh process."""
  from anakin_mz.cli import train as train_cli

  logdir = tmp_path / "cli"
  args = ["--env=catch", "--seeds", "0", "1", "--devices=1", f"--logdir={logdir}"]
  code = tiny.run_main(train_cli.main, *args, "--no-progress", *tiny.TINY, *EXTRA)
  out = capsys.readouterr()
  assert code == 0, out.out + out.err
  assert "study: seeds 0, 1 in one program" in out.out
  assert "seed layout: lanes (one device holds every seed; auto: one device" in out.out
  for s in SEEDS:
    summary = json.loads((logdir / f"seed{s}" / "train.json").read_text())
    assert summary["seed"] == s and summary["saved_step"] == 4
    assert ckpt.steps(str(logdir / f"seed{s}")) == (4,)
    assert any(f.startswith("events.out.tfevents") for f in os.listdir(logdir / f"seed{s}"))


@pytest.mark.parametrize(
  "override,message",
  [
    ("train.seeds=[0,0]", "train.seeds must be distinct integers >= 0, got [0, 0]"),
    ("train.seeds=[2,-1]", "train.seeds must be distinct integers >= 0, got [2, -1]"),
  ],
)
def test_bad_seeds_are_one_line(override, message):
  with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
    _config(override)


def test_an_agent_whose_step_does_not_vmap_is_refused(monkeypatch):
  spec = registry.get("ndmz")
  caps = spec.capabilities.__class__(**{**vars(spec.capabilities), "seed_axis": False})
  monkeypatch.setitem(
    registry._REGISTRY, "ndmz", spec.__class__(**{**vars(spec), "capabilities": caps})
  )
  with pytest.raises(ValueError, match="agent 'ndmz' cannot train several seeds as one program"):
    _study()
  assert _config().train.seeds == ()  # one run is fine


def test_train_and_train_seeds_refuse_each_others_configs(tmp_path):
  with pytest.raises(ValueError, match=r"study of seeds \[0, 1\].*run.train_seeds"):
    run.train(_study(), logdir=str(tmp_path), progress=False)
  with pytest.raises(ValueError, match="train_seeds needs a study's config"):
    run.train_seeds(_config(), logdir=str(tmp_path), progress=False)
  assert seeds.run_dirs("runs/x", _study()) == ["runs/x/seed0", "runs/x/seed1"]
  assert seeds.run_dirs("runs/x", _config()) == ["runs/x"]
  one = seeds.single(_study(), 1)
  assert one.seed == 1 and one.train.seeds == () and config_lib.from_dict(one.to_dict()) == one
  # The layout is the study's, not the seed's run: its checkpoints resume in any.
  assert seeds.single(_config("train.seeds=[0,1]", "train.seed_layout=seeds"), 1) == one
