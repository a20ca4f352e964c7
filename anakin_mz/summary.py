"""A small TensorBoard scalar writer on `tensorboard`'s own event-file writer
(no TensorFlow needed)."""

from __future__ import annotations

import os
import time
from typing import Mapping

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


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
