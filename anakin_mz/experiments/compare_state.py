"""What a comparison's run directory holds between its processes: the
scored points (`compare.jsonl`, one row each) and, beside the latest
checkpoint, how far the run trained to it (`trained.json`: its update step,
env steps, training seconds and self-play games). A run resumed after a
signal or a cut scoring counts its seconds and games from these, not from
its last scored point; `unscored_games` estimates the games where a run
directory from before the count was saved has none."""

from __future__ import annotations

import json
import os
from typing import Dict, List, Mapping, Optional

from anakin_mz.experiments import records as records_lib

ROWS_FILE = "compare.jsonl"
TRAINED_FILE = "trained.json"  # the run's training at its latest checkpoint


def read_rows(run_dir: str) -> List[Dict[str, object]]:
  """The scored points of one run, in order (an unfinished last line, from
  a process killed while writing it, is dropped)."""
  path = os.path.join(run_dir, ROWS_FILE)
  if not os.path.exists(path):
    return []
  rows = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      try:
        rows.append(json.loads(line))
      except json.JSONDecodeError:
        break
  return rows


def append_row(run_dir: str, row: Dict[str, object]) -> None:
  with open(os.path.join(run_dir, ROWS_FILE), "a", encoding="utf-8") as f:
    f.write(json.dumps(row) + "\n")
    f.flush()
    os.fsync(f.fileno())


def read_trained(run_dir: str) -> Optional[Dict[str, float]]:
  """`TRAINED_FILE`'s {"update_step", "train_s"[, "env_steps", "games"]}
  (the last two since 2026-11-28), or None."""
  try:
    with open(os.path.join(run_dir, TRAINED_FILE), encoding="utf-8") as f:
      return json.load(f)
  except (FileNotFoundError, json.JSONDecodeError):  # none yet, or cut while writing
    return None


def write_trained(
  run_dir: str, update_step: int, train_s: float, env_steps: float, games: float
) -> None:
  records_lib.write_json(
    os.path.join(run_dir, TRAINED_FILE),
    {"update_step": update_step, "train_s": train_s, "env_steps": env_steps, "games": games},
  )


def trained_seconds(
  last: Optional[Mapping[str, object]], saved: Optional[Mapping[str, float]]
) -> float:
  """The training seconds a run has behind it when it resumes: its last
  scored point's `train_s` (`last`, a row, or None), or the seconds saved
  with a later checkpoint (`saved`, `read_trained`'s, or None), where a
  chunk trained past that point and its scoring was cut or a signal stopped
  it: those seconds count."""
  base = float(last["train_s"]) if last else 0.0
  if saved is None or float(saved["update_step"]) <= (float(last["update_step"]) if last else -1.0):
    return base
  return max(base, float(saved["train_s"]))


def saved_games(saved: Optional[Mapping[str, float]], env_steps: float) -> Optional[float]:
  """The self-play games counted to the checkpoint at `env_steps`, where
  `saved` (`read_trained`'s) was written with that checkpoint and holds the
  count; None otherwise (no file, an older one, or another checkpoint)."""
  if saved is None or "games" not in saved or "env_steps" not in saved:
    return None
  return float(saved["games"]) if float(saved["env_steps"]) == float(env_steps) else None


def unscored_games(last: Optional[Mapping[str, object]], first_step: Mapping[str, float]) -> float:
  """The self-play games a run played between its last scored point `last`
  (a row, or None) and the checkpoint a chunk resumed from, given the
  chunk's first step row, for a run directory that saved no count
  (`saved_games`): 0 unless a chunk trained on and its scoring was cut (its
  checkpoint saved, no row). Estimated from the env steps in between at the
  games per env step of `last` (or, from the start or the untrained point,
  of this step). With no row yet (a first point past the start,
  `Budget.first`) the gap runs from the start."""
  last = last or {}
  resumed_at = first_step["env_steps"] - first_step["transitions"]
  gap = resumed_at - float(last.get("env_steps", 0.0))
  if gap < 1.0:
    return 0.0
  if float(last.get("env_steps", 0.0)) > 0 and float(last.get("games", 0.0)) > 0:
    rate = float(last["games"]) / float(last["env_steps"])
  else:
    rate = first_step["episodes"] / max(first_step["transitions"], 1.0)
  return gap * rate
