"""Sizing a run to the hardware: how many self-play lanes, and what follows
from them.

On a CPU the *work* bounds an Anakin step: every lane's search, every
sample's gradient costs its share, so throughput (env transitions/s) hardly
depends on the number of lanes, and the small defaults (64 lanes, batch 256)
are right. On a GPU or TPU the *latency* bounds it: a step runs a long chain
of small kernels (the search's simulations, the rollout's iterations, the
updates) whose count does not depend on the lanes, so throughput grows with
the lanes until the device is full. `scripts/benchmark_scale.py` measures
both and reports the chain's length (`sequential_ops`).

`scale(config, lanes)` resizes a config to `lanes` lanes (global, all devices)
and keeps what a run learns from each transition:

* `batch_size` grows with the lanes, so `updates_per_chunk` (the number of
  sequential updates per step) and the replay ratio (samples trained per
  transition) stay as configured. Keeping the batch and raising the
  updates instead would lengthen the chain, and the step's latency, in
  proportion to the lanes.
* `rollout_length` and `replay_capacity` are per lane and stay: each lane's
  ring keeps as many of its own games, so a sample is as fresh (in updates)
  as before, and `min_replay` is reached after as many chunks.
* the learning rate grows with the square root of the batch's growth
  (Adam's usual rule: the gradient's noise falls as 1/sqrt(batch)), up to
  `max_lr_scale` times; a bigger batch with the same step size would learn
  no faster per update than the small one.
* `eval_every`, `checkpoint_every` and `log_every` count updates and stay.

`PRESETS` name the sizes per device: `per-device` (`train.py`'s default)
gives each device the file's lanes and batch, so one device runs the file as
written (on CPU a device needs its own lanes to pay for the gradient
all-reduce; `scripts/benchmark_devices.py`, docs/devices.md); `cpu`
keeps the file's sizes global, split over the devices (the same seed then
gives the same run on any device count); `accelerator` gives each device
1024 lanes (`train.py --preset accelerator`). A resumed run keeps the sizes
its checkpoint was made with (`resumed`), whatever the device count now.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Optional

from anakin_mz.config import Config

# Self-play lanes per device of each preset (None: the config's own sizes,
# global; 0: the config's own lanes on each device).
PRESETS: Dict[str, Optional[int]] = {"cpu": None, "per-device": 0, "accelerator": 1024}


def scale(config: Config, lanes: int, *, max_lr_scale: float = 4.0) -> Config:
  """`config` resized to `lanes` self-play lanes (module docstring).

  Raises:
    ValueError: `lanes` < 1, or a batch that would not be a whole number of
      rows (the lanes must be a multiple of the config's own, or a divisor
      of its batch's scale).
  """
  tc = config.train
  if lanes < 1:
    raise ValueError(f"lanes must be >= 1, got {lanes}")
  batch = tc.batch_size * lanes / tc.num_envs
  if batch != int(batch) or batch < 1:
    raise ValueError(
      f"{lanes} lanes give a batch of {batch:g} rows ({tc.batch_size} x {lanes} / "
      f"{tc.num_envs}): use a number of lanes that keeps the batch whole"
    )
  lr_scale = min(math.sqrt(batch / tc.batch_size), max_lr_scale)
  train = dataclasses.replace(
    tc,
    num_envs=lanes,
    batch_size=int(batch),
    learning_rate=tc.learning_rate * lr_scale,
    learning_rate_end=tc.learning_rate_end * lr_scale,
  )
  return dataclasses.replace(config, train=train)


def check_preset(name: str) -> None:
  """Raises ValueError for a name not in `PRESETS` (the message lists them)."""
  if name not in PRESETS:
    raise ValueError(f"unknown preset {name!r}; presets: {', '.join(PRESETS)}")


def preset(config: Config, name: str, num_devices: int) -> Config:
  """`config` sized by preset `name` for `num_devices` devices.

  Raises:
    ValueError: an unknown preset (the message lists them).
  """
  check_preset(name)
  per_device = PRESETS[name]
  if per_device is None:
    return config
  return scale(config, (per_device or config.train.num_envs) * num_devices)


def resumed(config: Config, saved_lanes: int) -> Config:
  """`config` at the global lanes of the checkpoint it resumes (`saved_lanes`):
  the sizes and learning rate that `scale` gave the saved run, so a run
  sized per device on N devices continues on M.

  Raises:
    ValueError: `saved_lanes` that no scaling of `config` gives (the
      message names both sizes).
  """
  try:
    return scale(config, saved_lanes)
  except ValueError as e:
    raise ValueError(
      f"the checkpoint was made with {saved_lanes} lanes, which this config "
      f"({config.train.num_envs} lanes) does not scale to: {e}"
    ) from None
