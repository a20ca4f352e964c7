"""Scalar <-> categorical values with the invertible transform (MooZi 4.3.5).

MuZero and MooZi squash values and rewards with

    h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x

and represent `h(x)` on the integer support `[-S, ..., S]` as a "two-hot"
distribution: the two nearest integers get weights that reproduce `h(x)` as
their mean (e.g. `h(x) = 1.3` -> 0.7 on 1 and 0.3 on 2). A categorical head is
read back as `h^-1(sum_i p_i z_i)`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

EPS = 1e-3


def transform(x: jax.Array, eps: float = EPS) -> jax.Array:
  """h(x) = sign(x)(sqrt(|x|+1) - 1) + eps x, elementwise (any shape)."""
  return jnp.sign(x) * (jnp.sqrt(jnp.abs(x) + 1.0) - 1.0) + eps * x


def inverse_transform(y: jax.Array, eps: float = EPS) -> jax.Array:
  """h^-1(y), the exact inverse of `transform`, elementwise (any shape)."""
  root = (jnp.sqrt(1.0 + 4.0 * eps * (jnp.abs(y) + 1.0 + eps)) - 1.0) / (2.0 * eps)
  return jnp.sign(y) * (jnp.square(root) - 1.0)


def support(support_size: int) -> jax.Array:
  """float32 `[2S+1]`: the integers -S..S."""
  return jnp.arange(-support_size, support_size + 1, dtype=jnp.float32)


def two_hot(y: jax.Array, support_size: int) -> jax.Array:
  """`[...]` values (already transformed) -> `[..., 2S+1]` two-hot weights.

  `y` is clipped to [-S, S] first; the weights sum to 1 and their mean over
  the support equals the clipped `y`.
  """
  y = jnp.clip(y, -support_size, support_size)
  low = jnp.floor(y)
  frac = y - low
  low_idx = (low + support_size).astype(jnp.int32)
  high_idx = jnp.minimum(low_idx + 1, 2 * support_size)
  n = 2 * support_size + 1
  return (
    jax.nn.one_hot(low_idx, n) * (1.0 - frac)[..., None]
    + jax.nn.one_hot(high_idx, n) * frac[..., None]
  )


def scalar_to_categorical(x: jax.Array, support_size: int) -> jax.Array:
  """`[...]` scalars -> `[..., 2S+1]` two-hot of `h(x)` (the training target)."""
  return two_hot(transform(x), support_size)


def categorical_to_scalar(probs: jax.Array, support_size: int) -> jax.Array:
  """`[..., 2S+1]` probabilities -> `[...]` scalars `h^-1(E[z])`."""
  return inverse_transform(jnp.sum(probs * support(support_size), axis=-1))


def logits_to_scalar(logits: jax.Array, support_size: int) -> jax.Array:
  """`[..., 2S+1]` logits -> `[...]` scalars (softmax, then `categorical_to_scalar`)."""
  return categorical_to_scalar(jax.nn.softmax(logits, axis=-1), support_size)


def max_representable(support_size: int, eps: float = EPS) -> float:
  """The largest |x| whose `h(x)` fits the support without clipping."""
  return float(inverse_transform(jnp.float32(support_size), eps))
