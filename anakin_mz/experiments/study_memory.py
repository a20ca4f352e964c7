"""The memory a study (seeds as one program, `spec.choose`) would take and
the memory there is: the driver trains a variant's seeds as one program
only where est. `state_bytes` x the seeds x `SAFETY` fits in `free_memory`."""

from __future__ import annotations

from typing import Optional, Tuple

# A study's estimated memory: its state's bytes x this (the state in and out
# of a step, a stopped seed's copy, the step's temporaries).
SAFETY = 4


def state_bytes(config) -> int:
  """The bytes of one learner's state under `config` (params, optimizer
  state, replay, self-play lanes: its global arrays), from its shapes alone
  (`jax.eval_shape` of its `init`: nothing is allocated or compiled)."""
  import jax
  import numpy as np

  from anakin_mz.core import registry

  learner = registry.make_learner(config)
  shapes = jax.eval_shape(learner.init, jax.random.PRNGKey(0))
  return sum(int(np.prod(x.shape)) * x.dtype.itemsize for x in jax.tree.leaves(shapes))


def free_memory() -> Tuple[Optional[int], str]:
  """(bytes, what they are) of the memory a study could take: on an
  accelerator `bytes_limit - bytes_in_use` summed over this process's
  devices (`memory_stats`), on a CPU `MemAvailable` of /proc/meminfo;
  (None, why) where neither is known."""
  import jax

  devices = jax.local_devices()
  if devices[0].platform != "cpu":
    stats = [d.memory_stats() or {} for d in devices]
    if all("bytes_limit" in x for x in stats):
      free = sum(int(x["bytes_limit"]) - int(x.get("bytes_in_use", 0)) for x in stats)
      return free, f"free on {len(devices)} {devices[0].platform} device(s)"
    return None, f"the {devices[0].platform} devices report no memory"
  try:
    with open("/proc/meminfo", encoding="utf-8") as f:
      for line in f:
        if line.startswith("MemAvailable:"):
          return int(line.split()[1]) * 1024, "free host memory"
  except OSError:
    pass
  return None, "no /proc/meminfo"


def size_text(nbytes: int) -> str:
  """`nbytes` in MiB or GiB, 3 significant digits."""
  if nbytes < 2**30:
    return f"{nbytes / 2**20:.3g} MiB"
  return f"{nbytes / 2**30:.3g} GiB"
