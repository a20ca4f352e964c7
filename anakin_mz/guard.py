"""The NaN/inf guard of a training chunk, on device and cheap: every learner
(`anakin.Learner`, `tdlambda.TDLambdaLearner`) checks its chunk with it and
does not apply a chunk it flags."""

from __future__ import annotations

from typing import Dict, Tuple

import chex
import jax
import jax.numpy as jnp


def finite_check(
  metrics: Dict[str, chex.Array], params: chex.ArrayTree
) -> Tuple[Dict[str, chex.Array], chex.Array]:
  """`metrics` hold the `[U]` values of one chunk's U updates (loss terms,
  `loss`, `grad_norm`, ...); `params` are the parameters after the chunk.

  Returns a dict of bool `[]` flags, one per metric name plus `params`
  (some value was non-finite), and int32 `[]`, the index of the first
  update with a non-finite metric (-1 if none).
  """
  bad = {name: ~jnp.isfinite(v) for name, v in metrics.items()}  # [U] each
  flags = {name: jnp.any(b) for name, b in bad.items()}
  flags["params"] = ~jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(params)]))
  per_update = jnp.any(jnp.stack(list(bad.values())), axis=0)  # [U]
  first = jnp.where(jnp.any(per_update), jnp.argmax(per_update), -1)
  return flags, first.astype(jnp.int32)
