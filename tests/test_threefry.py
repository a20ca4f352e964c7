"""The CPU's threefry without a loop (`runtime/threefry.py`): the same random
numbers bit for bit, the same training run, a shorter compiled chain."""

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tiny

from anakin_mz.experiments.profiling import sequential_ops
from anakin_mz.runtime import threefry

# Runs `_DRAWS` with JAX's own CPU lowering (the loop) or the unrolled one,
# printing the draws; and two Anakin steps of a tiny Nannon run, printing the
# losses and the parameters.
_SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from anakin_mz.runtime import threefry
if sys.argv[1] == "rolled":
  threefry.unroll_on_cpu = lambda: None  # the Learner's call does nothing
else:
  threefry.unroll_on_cpu()
sys.path.insert(0, sys.argv[2])
import test_threefry, tiny
from anakin_mz.agents.replay_learner import Learner
draws = jax.jit(test_threefry.draws)(jax.random.PRNGKey(7))
losses, params = [], []
if sys.argv[3] == "train":
  learner = Learner(tiny.tiny_config("nannon"))
  state = learner.init_sharded(0)
  for _ in range(3):
    state, m = learner.jit_step(state)
    losses.append(float(m.terms["loss"]))
  params = jax.tree.leaves(state.params)
print(json.dumps(dict(
  draws=[np.asarray(x).tolist() for x in jax.tree.leaves(draws)],
  losses=losses,
  params=[np.asarray(x).tolist() for x in params],
)))
"""


def draws(key):
  """Every kind of draw the step makes (and a few more), on a batch of keys."""
  ks = jax.random.split(key, 5)
  return (
    jax.random.split(ks[0], 3),
    jax.random.uniform(ks[1], (33,)),
    jax.random.randint(ks[2], (17,), 0, 100),
    jax.random.categorical(ks[3], jnp.linspace(-1.0, 1.0, 7), shape=(9,)),
    jax.random.gamma(ks[4], jnp.full((8,), 0.3)),
    jax.random.dirichlet(jax.random.fold_in(key, 3), jnp.full((5,), 0.3)),
    jax.random.normal(jax.random.fold_in(key, 4), (6,)),
    jax.vmap(lambda k: jax.random.gumbel(k, (4,)))(ks),
  )


def _run(mode, train):
  out = subprocess.run(
    [sys.executable, "-c", _SCRIPT, mode, tiny.ROOT + "/tests", "train" if train else "draws"],
    env=tiny.cpu_env(),
    capture_output=True,
    text=True,
    timeout=600,
    check=True,
  )
  return json.loads(out.stdout.strip().splitlines()[-1])


def test_known_answers():
  """Random123's known-answer vectors of threefry2x32 (20 rounds), the ones
  JAX's tests use."""
  u = np.uint32
  cases = [
    ((0, 0), (0, 0), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
  ]
  for key, count, expected in cases:
    got = threefry._unrolled(u(key[0]), u(key[1]), u(count[0]), u(count[1]))
    assert [int(x) for x in got] == list(expected)


def _same(rolled, unrolled):
  for a, b in zip(rolled["draws"], unrolled["draws"], strict=True):
    np.testing.assert_array_equal(np.array(a), np.array(b))
  assert rolled["losses"] == unrolled["losses"]
  for a, b in zip(rolled["params"], unrolled["params"], strict=True):
    np.testing.assert_array_equal(np.array(a), np.array(b))


def test_same_numbers_as_the_loop():
  """JAX's CPU loop and the unrolled rule give the same draws bit for bit."""
  _same(_run("rolled", train=False), _run("unrolled", train=False))


@pytest.mark.slow  # two tiny trainings in subprocesses: 49 s of CI (cold cache)
def test_same_run_as_the_loop():
  """A tiny Nannon run (3 Anakin steps, updates applied) gives the same
  losses and parameters under either lowering (and the same draws)."""
  rolled, unrolled = _run("rolled", train=True), _run("unrolled", train=True)
  assert len(rolled["losses"]) == 3 and rolled["params"]
  _same(rolled, unrolled)


def test_no_loop_left_in_a_split():
  """Once installed, a split compiles to no while loop: a few kernels, not
  the loop's 5 x 17."""
  threefry.unroll_on_cpu()
  hlo = jax.jit(lambda k: jax.random.split(k, 4)).lower(jax.random.PRNGKey(0)).compile().as_text()
  assert "while(" not in hlo
  assert sequential_ops(hlo).total < 10


def test_kernel_chain_script_splits_the_whole_count():
  """scripts/benchmark_kernel_chain.py: the phases add up to the step's
  `sequential_ops`, and the search and the updates are among them."""
  proc = tiny.run_script("benchmark_kernel_chain", "--env", "nannon", "--lanes", "4", *tiny.TINY)
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  total = int(lines[0].rsplit(" ", 1)[1])
  phases = {line.split("%", 1)[1].strip(): int(line.split()[0]) for line in lines[1:]}
  assert sum(phases.values()) == total
  assert {"search", "loss/grad", "optimizer", "self-play env steps"} <= set(phases)
