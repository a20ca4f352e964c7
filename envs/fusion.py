"""A fusion boundary for the games' cheap producers (`materialize`): what
`Game.materialize_state` and the games' own observations use to compute
small values once per game, not once per element of what reads them."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def materialize(tree):
  """Returns `tree` (small arrays, e.g. per-game scalars) unchanged, bit for
  bit, but computed once per game before any consumer.

  XLA fuses cheap producers into their consumers; when the consumer is the
  loop that writes a large observation or mask, every element then
  recomputes them (the player, a one-hot, a reduction), which can cost far
  more than the observation itself. A product with the identity matrix is a
  fusion boundary (XLA's CPU dot kernels are never fused into loops;
  `lax.optimization_barrier` is stripped before fusion). Values pass through
  float32 exactly: bools and 8/16-bit ints as they are, 32-bit ints and
  floats as two 16-bit halves of their bits.
  """
  leaves, treedef = jax.tree.flatten(tree)
  parts = []
  for x in leaves:
    x = jnp.ravel(x)
    if x.dtype.itemsize == 4:
      bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
      parts += [(bits >> 16).astype(jnp.float32), (bits & 0xFFFF).astype(jnp.float32)]
    else:
      parts.append(x.astype(jnp.float32))
  # (A 1 x 1 product would be simplified to a multiply: pad to two.)
  flat = jnp.concatenate(parts + [jnp.zeros((1,), jnp.float32)])
  n = flat.shape[0]
  flat = jnp.dot(flat, jnp.eye(n, dtype=jnp.float32), precision=jax.lax.Precision.HIGHEST)
  out, start = [], 0
  for x in leaves:
    size = x.size
    if x.dtype.itemsize == 4:
      hi = flat[start : start + size].astype(jnp.uint32)
      lo = flat[start + size : start + 2 * size].astype(jnp.uint32)
      y = jax.lax.bitcast_convert_type((hi << 16) | lo, x.dtype)
      start += 2 * size
    else:
      y = flat[start : start + size].astype(x.dtype)
      start += size
    out.append(y.reshape(x.shape))
  return jax.tree.unflatten(treedef, out)


def materialize_small(tree, max_size: int = 8):
  """`materialize` applied to the leaves of `tree` with at most `max_size`
  elements (scalars, short vectors); larger leaves pass through."""
  leaves, treedef = jax.tree.flatten(tree)
  small = [i for i, x in enumerate(leaves) if jnp.size(x) <= max_size]
  done = materialize([leaves[i] for i in small])
  for i, x in zip(small, done):
    leaves[i] = x
  return jax.tree.unflatten(treedef, leaves)
