"""A small TensorBoard scalar writer on `tensorboard`'s own event-file writer
(no TensorFlow needed), and the tags of the run loop's rows, each defined
here once (`metrics.row` writes them, `eval.plots` reads them)."""

from __future__ import annotations

import os
import time
from typing import Mapping

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

# The tags of a row (`metrics.row`); a row's other keys are `tag(key)`.
RETURN = "selfplay/return_p0"  # mean return (player 0) of the games that ended
EPISODE_LENGTH = "selfplay/episode_length"  # their mean length (transitions)
ENV_STEPS_PER_S = "throughput/env_steps_per_s"
SEARCH_SIMS_PER_S = "throughput/search_sims_per_s"  # agents that search only
UPDATES_PER_S = "throughput/updates_per_s"
ENV_STEPS = "train/env_steps"  # TensorBoard's x-axes (`eval.plots`)
WALL = "train/wall_s"


def tag(key: str) -> str:
  """The TensorBoard tag of a row key: the key itself where it names a
  group (`selfplay/...`), else `train/<key>` (the learner's terms, counts,
  `env_steps`, `update_step`, `wall_s`)."""
  return key if "/" in key else f"train/{key}"


class SummaryWriter:
  """Writes scalars to `<logdir>/events.out.tfevents.*`."""

  def __init__(self, logdir: str):
    os.makedirs(logdir, exist_ok=True)
    if not os.access(logdir, os.W_OK):
      raise ValueError(f"logdir {logdir!r} is not writable")
    self._writer = EventFileWriter(logdir)

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    """Logs `{tag: value}` at `step`."""
    summary = summary_pb2.Summary(
      value=[summary_pb2.Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()]
    )
    self._writer.add_event(event_pb2.Event(wall_time=time.time(), step=int(step), summary=summary))

  def flush(self) -> None:
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()
