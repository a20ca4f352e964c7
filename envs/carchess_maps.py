"""Carchess maps: a small declarative JSON spec, parsed and validated.

A map is data, so adding one is adding a file `envs/maps/NAME.json`:

    {
      "name": "tutorial",
      "height": 10, "width": 10,
      "lanes": [{"start": [4, 9], "path": "WWWWWWWWW"}, ...],
      "lights": [[3, 4], ...]
    }

Cells are `[row, col]`, row 0 at the top. A lane is either `start` plus a
`path` of moves (`N` up, `S` down, `E` right, `W` left; one move per cell after
the first) or an explicit `cells` list. Cars enter at the lane's first cell and
score when they reach its last cell. A light stops every car standing on its
cell while it is red. `envs.make("carchess", map=...)` takes a map name from
`envs/maps/` or a path to a `.json` file.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Dict, List, Mapping, Tuple

MAPS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "maps")

Cell = Tuple[int, int]

_MOVES = {"N": (-1, 0), "S": (1, 0), "E": (0, 1), "W": (0, -1)}


@dataclasses.dataclass(frozen=True)
class CarchessMap:
  """A validated map.

  Attributes:
    name: the map's name.
    height, width: grid size (rows, columns).
    lanes: per lane, its cells in driving order (entry first, exit last).
    lights: the traffic-light cells, in the order of the light index.
  """

  name: str
  height: int
  width: int
  lanes: Tuple[Tuple[Cell, ...], ...]
  lights: Tuple[Cell, ...]

  @property
  def num_lanes(self) -> int:
    return len(self.lanes)

  @property
  def max_lane_length(self) -> int:
    return max(len(lane) for lane in self.lanes)


def available_maps() -> Tuple[str, ...]:
  """The names of the maps shipped in `envs/maps/`, sorted."""
  if not os.path.isdir(MAPS_DIR):
    return ()
  return tuple(sorted(f[:-5] for f in os.listdir(MAPS_DIR) if f.endswith(".json")))


def load_map(name_or_path: str) -> CarchessMap:
  """Loads and validates a map by name (from `envs/maps/`) or `.json` path.

  Raises:
    ValueError: unknown map, unreadable file, or an invalid spec.
  """
  if not isinstance(name_or_path, str) or not name_or_path:
    raise ValueError(f"carchess: map must be a non-empty string, got {name_or_path!r}")
  if name_or_path.endswith(".json"):
    path = name_or_path
  else:
    if name_or_path not in available_maps():
      raise ValueError(
        f"carchess: unknown map {name_or_path!r}; available maps: "
        f"{', '.join(available_maps())} (or a path to a .json file)"
      )
    path = os.path.join(MAPS_DIR, name_or_path + ".json")
  try:
    with open(path, encoding="utf-8") as f:
      spec = json.load(f)
  except (OSError, json.JSONDecodeError) as e:
    raise ValueError(f"carchess: cannot read map file {path!r}: {e}") from None
  return parse_map(spec)


def _cell(value: Any, what: str, height: int, width: int) -> Cell:
  if (
    not isinstance(value, (list, tuple))
    or len(value) != 2
    or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
  ):
    raise ValueError(f"carchess map: {what} must be [row, col] integers, got {value!r}")
  r, c = value
  if not (0 <= r < height and 0 <= c < width):
    raise ValueError(f"carchess map: {what} {[r, c]} is outside the {height} x {width} grid")
  return (r, c)


def _lane_cells(lane: Any, k: int, height: int, width: int) -> Tuple[Cell, ...]:
  what = f"lane {k}"
  if not isinstance(lane, Mapping):
    raise ValueError(
      f"carchess map: {what} must be an object with 'start' and 'path', or 'cells'; got {lane!r}"
    )
  if "cells" in lane:
    if not isinstance(lane["cells"], list):
      raise ValueError(f"carchess map: {what} 'cells' must be a list of [row, col]")
    cells = [_cell(c, f"{what} cell", height, width) for c in lane["cells"]]
  elif "start" in lane and "path" in lane:
    path = lane["path"]
    if not isinstance(path, str) or any(m not in _MOVES for m in path):
      raise ValueError(f"carchess map: {what} 'path' must be a string of N/S/E/W, got {path!r}")
    cells = [_cell(lane["start"], f"{what} start", height, width)]
    for m in path:
      dr, dc = _MOVES[m]
      cells.append(
        _cell([cells[-1][0] + dr, cells[-1][1] + dc], f"{what} path cell", height, width)
      )
  else:
    raise ValueError(
      f"carchess map: {what} needs 'start' and 'path', or 'cells'; got keys {sorted(lane)}"
    )
  if len(cells) < 3:
    raise ValueError(
      f"carchess map: {what} has {len(cells)} cells; a lane needs >= 3 "
      "(entry, at least one cell to stand on, exit)"
    )
  for a, b in zip(cells, cells[1:]):
    if abs(a[0] - b[0]) + abs(a[1] - b[1]) != 1:
      raise ValueError(
        f"carchess map: {what} cells {list(a)} and {list(b)} are not "
        "neighbours (each step moves one cell N, S, E or W)"
      )
  if len(set(cells)) != len(cells):
    raise ValueError(f"carchess map: {what} visits a cell twice")
  return tuple(cells)


def parse_map(spec: Mapping[str, Any]) -> CarchessMap:
  """Validates a map spec (the parsed JSON object) and returns the map.

  Raises:
    ValueError: saying which field is wrong and what is valid.
  """
  if not isinstance(spec, Mapping):
    raise ValueError(f"carchess map: the spec must be a JSON object, got {type(spec).__name__}")
  missing = [k for k in ("name", "height", "width", "lanes", "lights") if k not in spec]
  if missing:
    raise ValueError(
      f"carchess map: missing field(s) {missing}; a map needs name, height, width, lanes, lights"
    )
  height, width = spec["height"], spec["width"]
  for key, v in (("height", height), ("width", width)):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
      raise ValueError(f"carchess map: {key} must be a positive integer, got {v!r}")
  if not isinstance(spec["lanes"], list) or not spec["lanes"]:
    raise ValueError("carchess map: 'lanes' must be a non-empty list")
  lanes = tuple(_lane_cells(lane, k, height, width) for k, lane in enumerate(spec["lanes"]))
  if not isinstance(spec["lights"], list):
    raise ValueError("carchess map: 'lights' must be a list of [row, col]")
  lights = tuple(_cell(c, "light", height, width) for c in spec["lights"])
  if len(set(lights)) != len(lights):
    raise ValueError("carchess map: two lights on one cell")
  standing = {cell for lane in lanes for cell in lane[:-1]}
  for light in lights:
    if light not in standing:
      raise ValueError(
        f"carchess map: light {list(light)} is not on a lane cell a car "
        "can stand on (any lane cell but the last)"
      )
  return CarchessMap(name=str(spec["name"]), height=height, width=width, lanes=lanes, lights=lights)


def map_to_spec(m: CarchessMap) -> Dict[str, Any]:
  """The JSON-ready spec of `m` (lanes as explicit `cells`)."""
  lanes: List[Dict[str, Any]] = [{"cells": [list(c) for c in lane]} for lane in m.lanes]
  return {
    "name": m.name,
    "height": m.height,
    "width": m.width,
    "lanes": lanes,
    "lights": [list(c) for c in m.lights],
  }
