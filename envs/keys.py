"""PRNG keys at the games' public entry points: both JAX key flavours read
as raw threefry data (`raw_key`), one key where one game is played
(`single_key`), and the keyed step's cheap random words (`key_words`,
`open_uniforms`). `envs.core` re-exports them."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.random import threefry_2x32


def raw_key(key: jax.Array) -> jax.Array:
  """uint32 `[..., 2]`: the raw threefry key data of `key`, which may be a
  typed key (`jax.random.key`, JAX's recommended flavour) or a raw one
  (`jax.random.PRNGKey`). The same key data gives the same key either way,
  so a game played with `jax.random.key(0)` is the game played with
  `jax.random.PRNGKey(0)`. Every public entry point that takes a key passes
  it through here first; the rest of the package works on raw keys (they
  live in `jnp.where` selects and pytrees of plain arrays).

  Raises:
    ValueError: a typed key of another PRNG implementation than threefry
      (the keyed step hashes the key data with threefry), or an array that
      is not a key (not uint32 with a last axis of 2).
  """
  if jax.dtypes.issubdtype(jnp.result_type(key), jax.dtypes.prng_key):
    impl = str(jax.random.key_impl(key))
    if "threefry" not in impl:
      raise ValueError(
        f"keys of PRNG implementation {impl} are not supported; use the default "
        "threefry keys (jax.random.key(seed) or jax.random.PRNGKey(seed))"
      )
    return jax.random.key_data(key)
  key = jnp.asarray(key)
  if key.dtype != jnp.uint32 or key.shape[-1:] != (2,):
    raise ValueError(
      f"expected a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), got an "
      f"array of dtype {key.dtype} and shape {key.shape}"
    )
  return key


def single_key(key: jax.Array, entry: str, env_id: str) -> jax.Array:
  """`raw_key(key)` (uint32 `[2]`), refused unless `key` is one key: a batch
  of keys given to `env.<entry>` of game `env_id` outside `jax.vmap` would
  otherwise play one game (or fail deep inside a game's rules). Checked at
  trace time, from the key's shape.

  Raises:
    ValueError: a batch of keys (or what `raw_key` refuses).
  """
  raw = raw_key(key)
  if raw.shape != (2,):
    raise ValueError(
      f"{env_id}: env.{entry} takes one PRNG key, got a batch of keys of shape {raw.shape[:-1]}; "
      f"for a batch of games use jax.vmap(env.{entry})"
    )
  return raw


def key_words(key: jax.Array, n: int) -> jax.Array:
  """uint32 `[n]`: pseudo-random words of a raw uint32 `[2]` PRNG key, from
  one threefry call that yields two words per hash (`jax.random.uniform`
  would hash once per word, and `split` then `uniform` is two calls: on CPU
  each call is a rolled loop with its own overhead, which made the keyed
  step's random numbers a third of a Nannon step)."""
  m = n + n % 2
  return threefry_2x32(key, jnp.arange(m, dtype=jnp.uint32))[:n]


def open_uniforms(words: jax.Array) -> jax.Array:
  """float32 uniforms in (0, 1] from uint32 words (23 bits each, as
  `jax.random.uniform` makes them; (0, 1] so that inverse CDF never draws
  an outcome of probability 0)."""
  mantissa = jax.lax.shift_right_logical(words, jnp.uint32(9)) | jnp.uint32(0x3F800000)
  return 2.0 - jax.lax.bitcast_convert_type(mantissa, jnp.float32)
