"""The readers of older configs: what a config saved with a run (a
checkpoint's, a model file's) in an older layout needs to be in today's,
the one that `schema.from_dict` reads. Each takes a mapping and returns the
mapping in today's layout; none imports the schema. They run once, in
`anakin-mz migrate` (`runtime.migrate`, through `upgrade_saved`): loading
reads today's layout only, and `schema.from_saved` raises `OlderLayout`
(naming the tool) for a config these would change.

* `MOVED`: keys that moved from a shared section into an agent's own
  (`train.td_lambda` is `tdlambda.td_lambda`): `from_dict` refuses the old
  spelling, naming the new; `move_to_agent_sections` moves it in the configs
  saved before.
* `discount_at_top`: configs saved before the discount became one top-level
  setting hold it twice, `search.discount` and `train.discount`; `from_dict`
  refuses either, naming the top-level key.
"""

from __future__ import annotations

from typing import List, Mapping, Tuple


class OlderLayout(ValueError):
  """A config saved in an older layout: `anakin-mz migrate` converts the
  checkpoint or model file that holds it."""


# The keys that moved from a shared section into an agent's own, (section,
# key) -> the agent: `from_dict` refuses the old spelling, naming the new;
# `from_saved` moves it in the configs saved before.
MOVED = {("train", "td_lambda"): "tdlambda"}


def move_to_agent_sections(raw: Mapping[str, object]) -> Mapping[str, object]:
  """`raw` (a saved config's mapping) with each key that has since moved
  into an agent's own section (`MOVED`) moved there where the config is
  that agent's, and dropped where it is another's, which never read it
  (every saved config carried `train.td_lambda`)."""
  if not isinstance(raw, Mapping):
    return raw
  out = dict(raw)
  agent = raw.get("agent", "ndmz")
  for (section, key), owner in MOVED.items():
    values = out.get(section)
    if isinstance(values, Mapping) and key in values:
      out[section] = {k: v for k, v in values.items() if k != key}
      if agent == owner:
        own = out.get(owner)
        own = dict(own) if isinstance(own, Mapping) else {}
        own.setdefault(key, values[key])
        out[owner] = own
  return out


def discount_at_top(raw: Mapping[str, object]) -> Mapping[str, object]:
  """Configs saved before the discount became one top-level setting hold it
  twice, `search.discount` and `train.discount`, which had to be equal:
  moves that value to the top level."""
  search, train = raw.get("search"), raw.get("train")
  if not (
    isinstance(search, Mapping)
    and isinstance(train, Mapping)
    and "discount" in search
    and "discount" in train
    and "discount" not in raw
  ):
    return raw
  if search["discount"] != train["discount"]:
    raise ValueError(
      f"search.discount ({search['discount']}) differs from "
      f"train.discount ({train['discount']}); the discount is one setting"
    )
  out = dict(raw, discount=search["discount"])
  out["search"] = {k: v for k, v in search.items() if k != "discount"}
  out["train"] = {k: v for k, v in train.items() if k != "discount"}
  return out


def upgrade_saved(raw: Mapping[str, object]) -> Tuple[Mapping[str, object], List[str]]:
  """(`raw` in today's layout, one line per change made; none where it is
  today's already): every reader above, in the order the layouts changed.
  Raises ValueError where `raw` cannot be converted (two different
  discounts)."""
  notes = []
  moved = move_to_agent_sections(raw)
  if moved != raw:
    notes.append(
      "config: " + ", ".join(f"{s}.{k} moved to agent {o}'s section" for (s, k), o in MOVED.items())
    )
  top = discount_at_top(moved)
  if top != moved:
    notes.append("config: search.discount and train.discount made the one top-level discount")
  return top, notes


def check_saved(raw: Mapping[str, object]) -> None:
  """Raises `OlderLayout` (what would change) where `raw`, a saved
  config, is not in today's layout."""
  if not isinstance(raw, Mapping):
    return  # from_dict names what a config must be
  try:
    _, notes = upgrade_saved(raw)
  except ValueError as e:
    raise OlderLayout(f"config of an older layout that does not convert: {e}") from None
  if notes:
    raise OlderLayout("; ".join(notes))
