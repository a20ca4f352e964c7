"""Which devices a run uses, chosen before JAX starts: the CPU device count
and, where a multi-process environment is present, `jax.distributed`.

CPU. JAX's default is one device whose XLA thread pool spans every core.
The Anakin step is device-local (`mesh.py`): each device plays, searches
and samples its own lanes and the devices share only reductions, so one
forced host device per core lets the cores work side by side, where one
device's thread pool parallelises only inside each small kernel. On this
2-core machine two forced devices ran the Nannon step faster than one device
on both cores and than one device pinned to one core
(`scripts/benchmark_devices.py`; the figures are in the README). So on CPU
`--devices auto` is one device per usable core (the run trains on as many
of them as divide its global sizes, `run.auto_mesh`), and `--devices N`
forces N host devices.

`num_envs` and `batch_size` are global: N devices split the same lanes and
the same batch N ways, and the run is the same as on one device (to float
rounding). On a GPU or TPU the accelerator's devices are used and the CPU
device count does not matter.

Multi-host (a TPU pod slice, a SLURM or Open MPI job, or processes started
by hand): `initialize_distributed` calls `jax.distributed.initialize()` when
one of these environments is present:

* `JAX_COORDINATOR_ADDRESS=host:port` with `JAX_NUM_PROCESSES` and
  `JAX_PROCESS_ID` (ours; JAX reads the address itself), e.g. two processes
  on one machine:

      export JAX_COORDINATOR_ADDRESS=localhost:12345 JAX_NUM_PROCESSES=2
      JAX_PROCESS_ID=0 python scripts/train.py ... &
      JAX_PROCESS_ID=1 python scripts/train.py ...

  (`tests/test_sharding.py` runs this on CPU);
* a multi-host Cloud TPU (`TPU_WORKER_HOSTNAMES` names several hosts), a
  SLURM job of several tasks (`SLURM_NTASKS` > 1) or Open MPI
  (`OMPI_COMM_WORLD_SIZE` > 1): JAX detects the rest.

Every process runs the same `train.py` command. The mesh then spans every
process's devices (`jax.devices()`): each process initialises, plays and
stores only the lanes of its own devices, the gradients are averaged over
all of them, and Orbax writes each process's shards of the checkpoint (the
checkpoint directory must be shared, e.g. a `gs://` bucket). Only process 0
writes TensorBoard and the progress bar.
"""

from __future__ import annotations

import os
from typing import Optional, Union

import jax


def usable_cores() -> int:
  """The CPU cores this process may run on (respects `taskset`)."""
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:  # not on Linux
    return os.cpu_count() or 1


def parse_devices(text: Union[str, int]) -> int:
  """`"auto"` -> one per usable core; a positive integer -> itself.

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


def distributed_environment() -> Optional[str]:
  """The multi-process environment present (the variable that shows it), or
  None for a single process."""
  if os.environ.get("JAX_COORDINATOR_ADDRESS"):
    return "JAX_COORDINATOR_ADDRESS"
  if "," in os.environ.get("TPU_WORKER_HOSTNAMES", ""):
    return "TPU_WORKER_HOSTNAMES"
  for name in ("SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"):
    try:
      if int(os.environ.get(name, "1")) > 1:
        return name
    except ValueError:
      pass
  return None


def initialize_distributed() -> Optional[str]:
  """Calls `jax.distributed.initialize()` if a multi-process environment is
  present (module docstring); call before any JAX computation. Returns a
  description of this process's place, or None for a single process.

  Raises:
    ValueError: `JAX_COORDINATOR_ADDRESS` without valid `JAX_NUM_PROCESSES`
      and `JAX_PROCESS_ID`.
  """
  env = distributed_environment()
  if env is None:
    return None
  kwargs = {}
  if env == "JAX_COORDINATOR_ADDRESS":
    try:
      kwargs = {
        "num_processes": int(os.environ["JAX_NUM_PROCESSES"]),
        "process_id": int(os.environ["JAX_PROCESS_ID"]),
      }
    except (KeyError, ValueError):
      raise ValueError(
        "JAX_COORDINATOR_ADDRESS is set: JAX_NUM_PROCESSES (the number of processes) and "
        "JAX_PROCESS_ID (this one's index, 0-based) must be set to integers too"
      ) from None
  jax.distributed.initialize(**kwargs)
  return f"process {jax.process_index()} of {jax.process_count()} ({env})"


# Each CPU device runs its kernels on its own thread instead of splitting a
# matmul over Eigen's pool, which the devices of one process share: two
# devices then stop contending for both cores inside every small kernel (the
# A/B is in docs/devices.md). Set before the backend starts; a flag the user
# set in XLA_FLAGS wins.
EIGEN_FLAG = "--xla_cpu_multi_thread_eigen"


def _one_thread_per_device() -> None:
  flags = os.environ.get("XLA_FLAGS", "")
  if EIGEN_FLAG not in flags:
    os.environ["XLA_FLAGS"] = f"{flags} {EIGEN_FLAG}=false".strip()


def _cpu_note(devices: Union[str, int], count: int, cores: int) -> str:
  """What `configure`'s line adds on CPU: why this device count."""
  if devices == "auto":
    return " (--devices auto: one device per core, the fastest measured; --devices N to change)"
  if count > cores:
    return (
      f" (--devices {devices}: more devices than usable cores, so they share them; "
      "--devices auto, one per core, was the fastest measured)"
    )
  if count < cores:
    return f" (--devices {devices}: fewer devices than cores; --devices auto gives one per core)"
  return f" (--devices {devices}: one per core, as --devices auto)"


def configure(devices: Union[str, int] = "auto") -> str:
  """Sets the number of CPU devices (per process) and joins a multi-process
  run where one is set up (`initialize_distributed`); call before any JAX
  computation. (A run on `auto` devices then trains on as many of them as
  divide its sizes, `run.auto_mesh`.)

  Returns a one-line description of the devices the run will use, and why
  for `auto`.

  Raises:
    ValueError: a bad `devices` value, or JAX already started its backend
      with another number of CPU devices (the count can no longer change).
  """
  n = parse_devices(devices)
  if n > 1:
    _one_thread_per_device()
  try:
    jax.config.update("jax_num_cpu_devices", n)
  except RuntimeError as e:
    # Started already (a tool called in-process after other JAX work): fine
    # where it has the devices asked for, which cannot change any more.
    if len(jax.devices("cpu")) != n:
      raise ValueError(f"cannot set {n} CPU devices: JAX has already started ({e})") from None
  # With asynchronous dispatch, the CPU devices of one process run their small
  # kernels at about half speed while another device runs (2,000 steps of an
  # 8 x 32 matmul loop: 2.3x slower on two devices than on one), which the
  # Anakin step, thousands of small kernels, pays in full. Synchronous
  # dispatch runs them side by side; the run loop waits for every step anyway.
  jax.config.update("jax_cpu_enable_async_dispatch", False)
  process = initialize_distributed()
  local = jax.local_devices()
  kind = local[0].platform
  if kind == "cpu":
    line = f"{len(local)} CPU device(s) on {usable_cores()} usable core(s)"
    line += _cpu_note(devices, len(local), usable_cores())
  else:
    line = f"{len(local)} {kind.upper()} device(s): {local[0].device_kind}"
    if devices != "auto":
      line += f" (--devices {devices} sets the CPU devices only: it does not apply here)"
  if process is not None:
    line += f"; {process}, {jax.device_count()} devices in all"
  return line
