"""Threefry without a loop on the CPU: the same bits, a shorter kernel chain.

JAX lowers its PRNG hash, threefry2x32, to a `fori_loop` of five rounds on
the CPU (to compile faster) and without a loop everywhere else (one kernel on
a GPU, `cu_threefry2x32_ffi`). In a compiled Anakin step the CPU's loop is 85
instructions run one after another (5 trips of 17) for every
`jax.random.split`, `uniform`, `randint`... , two thirds of the step's
`sequential_ops` (`experiments.profiling`) in the default Nannon step
(96,050 of 141,045), against about one fusion once unrolled.
`unroll_on_cpu()` registers the unrolled lowering (the rounds of JAX's
own unrolled rule, which every other platform compiles) for the CPU: the
same arithmetic in the same order on uint32, so every random number is the
same bit for bit (`tests/test_threefry.py`); XLA fuses the chain into one
kernel or a few.

On an accelerator it changes nothing (the rule is the CPU's only), so the
part of the CPU's chain that it removes was never in a GPU's: the figures of
`docs/results/accelerator.md` ("kernel chain") say which cuts reach a GPU.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.extend.random import threefry2x32_p
from jax.interpreters import mlir

_ROTATIONS = (np.array([13, 15, 26, 6], np.uint32), np.array([17, 29, 16, 24], np.uint32))
_installed = False


def _rotate_left(x, d):
  d = np.uint32(d)
  return (x << d) | (x >> (np.uint32(32) - d))


def _unrolled(key1, key2, x1, x2):
  """threefry2x32 on uint32 arrays, its 20 rounds written out (JAX's
  `_threefry2x32_lowering(..., use_rolled_loops=False)`)."""
  ks = [key1, key2, key1 ^ key2 ^ np.uint32(0x1BD11BDA)]
  x = [x1 + ks[0], x2 + ks[1]]
  for block in range(5):
    for r in _ROTATIONS[block % 2]:
      x[0] = x[0] + x[1]
      x[1] = _rotate_left(x[1], r)
      x[1] = x[0] ^ x[1]
    x[0] = x[0] + ks[(block + 1) % 3]
    x[1] = x[1] + ks[(block + 2) % 3] + jnp.uint32(block + 1)
  return tuple(x)


def unroll_on_cpu() -> None:
  """Compiles threefry2x32 without a loop on the CPU from now on, in this
  process (idempotent; programs already compiled keep their loop). The
  random numbers do not change."""
  global _installed
  if not _installed:
    rule = mlir.lower_fun(_unrolled, multiple_results=True)
    mlir.register_lowering(threefry2x32_p, rule, platform="cpu")
    _installed = True
