"""How a run spreads over the host's CPU cores, chosen before JAX starts.

On a CPU, JAX's default is one device whose XLA thread pool spans every core.
For the small networks and batched games of this project that pool gains
little from a second core. A first measurement on a 2-core machine (Nannon's
default config, one Anakin step, median of 8, taken while other jobs loaded
the machine, so only indicative): one device on both cores made 0.9x the
updates/s of one device pinned to one core; one JAX device *per core*, with
the Anakin step `pmap`ped over them (each device plays its own lanes into
its own replay buffer; gradients are averaged), made 2.0x; single-threaded
devices (`--xla_cpu_multi_thread_eigen=false`) 0.96x, as XLA then
serialises the devices' work. So on CPU `train.py` makes one device per
usable core (`--devices auto`, the cores `taskset` or the cgroup allow).
`scripts/benchmark_devices.py` measures this again on a given machine.

`num_envs` and `batch_size` are per device, so N devices generate N times
the data of one and average N batches per update. On a GPU or TPU the
accelerator's devices are used and the CPU device count does not matter.
"""

from __future__ import annotations

import os
from typing import Union

import jax


def usable_cores() -> int:
  """The CPU cores this process may run on (respects `taskset`)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


def parse_devices(text: Union[str, int]) -> int:
  """`"auto"` -> the usable cores; a positive integer -> itself.

  Raises:
    ValueError: anything else.
  """
  if text == "auto":
    return usable_cores()
  try:
    n = int(text)
  except (TypeError, ValueError):
    n = 0
  if n < 1:
    raise ValueError(f"--devices must be 'auto' or an integer >= 1, got {text!r}")
  return n


def configure(devices: Union[str, int] = "auto") -> str:
  """Sets the number of CPU devices; call before any JAX computation.

  Returns a one-line description of the devices the run will use.

  Raises:
    ValueError: a bad `devices` value, or JAX already started its backend
      (the count can no longer change).
  """
  n = parse_devices(devices)
  try:
    jax.config.update("jax_num_cpu_devices", n)
  except RuntimeError as e:
    raise ValueError(f"cannot set {n} CPU devices: JAX has already started ({e})") from None
  local = jax.local_devices()
  kind = local[0].platform
  if kind == "cpu":
    return (
      f"{len(local)} CPU device(s), one per core of {usable_cores()} usable (--devices to change)"
    )
  return f"{len(local)} {kind.upper()} device(s): {local[0].device_kind}"
