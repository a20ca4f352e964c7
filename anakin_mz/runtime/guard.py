"""The NaN/inf guard of a training chunk, on device and cheap: every learner
(`learner.BaseLearner`) checks its chunk with it and does not apply a chunk
it flags."""

from __future__ import annotations

from typing import Dict, Tuple, Union

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


def guarded(
  checked: Dict[str, chex.Array],
  params: chex.ArrayTree,
  opt_state: chex.ArrayTree,
  old_params: chex.ArrayTree,
  old_opt_state: chex.ArrayTree,
  ready: Union[bool, chex.Array] = True,
):
  """A chunk's `params` and `opt_state`, applied only where it is `ready`
  (bool `[]`) and `finite_check(checked, params)` flags nothing: else the
  old ones (a state is never non-finite).

  Returns (params, opt_state, applied bool `[]`, the flags of
  `finite_check` where `ready`, the first bad update's index where `ready`,
  else -1).
  """
  nonfinite, first_bad = finite_check(checked, params)
  applied = ready & ~jnp.any(jnp.stack(list(nonfinite.values())))
  keep = lambda new, old: jax.tree.map(lambda n, o: jnp.where(applied, n, o), new, old)
  flags = {k: v & ready for k, v in nonfinite.items()}
  first = jnp.where(ready, first_bad, -1)
  return keep(params, old_params), keep(opt_state, old_opt_state), applied, flags, first
