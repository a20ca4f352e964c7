"""Converts the older results into run records, once (kept as the account of
how `docs/results/records/` and the `record.jsonl` files under
`docs/results/strength_runs/` were made; running it again rewrites them the
same way).

* Converted (`source` "converted"): each `strength_runs/<bar>/seed<S>/
  strength.json` (into a `record.jsonl` beside it), the accelerator JSONs
  (`accelerator/*.json`) and the search JSONs (`search/nannon_shipped/`).
* Transcribed (`source` "transcribed"): every row of the hand-written tables
  of `docs/results/*.md` at commit 9faa6f9 whose runs are not in git, one
  record per row, with the row's cells as the table gave them, and the
  command the document gives for it. The strength table's own rows and the
  search table's two other models become typed records (their numbers read
  from the table), so those tables are drawn from figures, not text.

    python docs/results/records/convert.py       # from the repository root
"""

from __future__ import annotations

import dataclasses
import glob
import json
import os
import re
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, ROOT)

from anakin_mz.experiments import records as R  # noqa: E402
from anakin_mz.experiments import strength  # noqa: E402

AT = "9faa6f9"
RESULTS = os.path.join("docs", "results")
CPU_CORE = "cpu: one core of the 2-core host (taskset)"


def doc_at(name: str) -> List[str]:
  out = subprocess.run(
    ["git", "show", f"{AT}:docs/results/{name}.md"], capture_output=True, text=True, check=True
  )
  return out.stdout.splitlines()


def split_row(line: str) -> List[str]:
  cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
  return [c.strip() for c in cells]


def tables_of(lines: Sequence[str]):
  """[(first line index, header cells, aligns, rows)] of a Markdown file."""
  out, i = [], 0
  while i < len(lines):
    if lines[i].startswith("|"):
      j = i
      while j < len(lines) and lines[j].startswith("|"):
        j += 1
      head = split_row(lines[i])
      aligns = ["right" if c.endswith(":") else "left" for c in split_row(lines[i + 1])]
      out.append((i, head, aligns, [split_row(x) for x in lines[i + 2 : j]]))
      i = j
    else:
      i += 1
  return out


def code_blocks(lines: Sequence[str]) -> List[str]:
  out, i = [], 0
  while i < len(lines):
    if lines[i].startswith("```"):
      j = i + 1
      while not lines[j].startswith("```"):
        j += 1
      out.append("\n".join(lines[i + 1 : j]))
      i = j + 1
    else:
      i += 1
  return out


def transcribed(
  experiment: str,
  variant: str,
  cells: Optional[Sequence[str]],
  *,
  doc: str,
  seed: Optional[int] = None,
  command: Optional[str] = None,
  overrides: Sequence[str] = (),
  budget: R.Budget = R.Budget(),
  evaluation: Optional[Dict[str, object]] = None,
  figures: Optional[Dict[str, R.Figure]] = None,
  device: Optional[str] = None,
  commit: Optional[str] = None,
  date: Optional[str] = None,
  note: str = "",
) -> R.RunRecord:
  return R.RunRecord(
    experiment=experiment,
    variant=variant,
    seed=seed,
    command=command,
    overrides=tuple(overrides),
    budget=budget,
    evaluation=dict(evaluation or {}),
    figures=dict(figures or {}),
    device=device,
    commit=commit,
    date=date,
    source="transcribed",
    origin=f"docs/results/{doc}.md at {AT}",
    note=note,
    cells=None if cells is None else tuple(cells),
  )


# --------------------------------------------- the hand-written tables ----


@dataclasses.dataclass(frozen=True)
class T:
  """A transcribed table: its name (tables.yaml), the index of the code block of its
  document that gives its command (None: none does), the date and device of
  its runs, their commit, the seed of its rows (unless a row names one), a
  note for every row."""

  name: str
  block: Optional[int]
  date: Optional[str]
  device: str
  commit: Optional[str] = None
  seed: Optional[int] = None
  note: str = ""


# (doc, table index) -> T.
CPU2 = "cpu: the 2-core host, one core per run (taskset)"
SWEEP16 = "cpu: the 16-core host of a lent GPU machine, one core per run (taskset)"
NOTE_24MIN = (
  "continued from runs/compare_1256_s0 (and runs/compare_1256_tdl_s0) with "
  "--minutes 24 --every 8 --out runs/compare_1256_long (and runs/compare_1256_long_tdl)"
)
TRANSCRIBED = {
  ("carchess_sweep", 0): T("carchess_sweep", 0, "2026-11-25", CPU2, commit="c0eac9e", seed=0),
  ("einstein_sweep", 0): T("einstein_sweep_round1", 0, "2026-11-24", CPU2, seed=0),
  ("einstein_sweep", 1): T("einstein_sweep_reference", 1, "2026-11-24", CPU2),
  ("einstein_sweep", 2): T("einstein_sweep_round2", 2, "2026-11-24", CPU2, seed=0),
  ("einstein_sweep", 3): T("einstein_sweep_round2_controls", 3, "2026-11-24", CPU2, seed=0),
  ("einstein_sweep", 4): T("einstein_sweep_round3", 4, "2026-11-25", CPU2, seed=0),
  ("layout_figures", 0): T(
    "layout_figures",
    None,
    None,
    "cpu: one core",
    seed=3,
    note="the script of layout_figures.md, run from each tree's root (before: f57c191)",
  ),
  ("minatar", 0): T("minatar_cpu", 0, "2026-11-23", CPU2),
  ("minatar", 1): T(
    "minatar_h100", 1, "2026-11-24", "gpu: one NVIDIA H100 shared by five processes"
  ),
  ("nannon", 0): T("nannon_636_end", 0, "2026-11-24", CPU2),
  ("nannon", 1): T("nannon_636_3min", 0, "2026-11-24", CPU2),
  ("nannon", 2): T("nannon_636_equal_env_steps", 0, "2026-11-24", CPU2),
  ("nannon", 3): T("nannon_636_dynamics", 0, "2026-11-24", CPU2),
  ("nannon", 4): T("nannon_1256_end", 1, "2026-11-24", CPU2),
  ("nannon", 5): T("nannon_1256_dynamics", 1, "2026-11-24", CPU2),
  ("nannon", 6): T("nannon_1256_k3", 2, "2026-11-24", CPU2),
  ("nannon", 7): T(
    "nannon_1256_24min",
    None,
    "2026-11-24",
    CPU2,
    seed=0,
    note=NOTE_24MIN,
  ),
  ("nannon_15min", 0): T("nannon_15min", 0, "2026-11-24", CPU2),
  ("nannon_15min", 1): T(
    "nannon_15min_recheck",
    0,
    "2026-11-24",
    CPU2,
    commit="83b36e7",
    note="the same commands into runs/nannon15_new/",
  ),
  ("nannon_15min", 2): T("nannon_15min_k6", 1, "2026-11-23", CPU2),
  ("nannon_sweep", 0): T("nannon_sweep_round1", 0, "2026-11-24", SWEEP16),
  ("nannon_sweep", 1): T("nannon_sweep_round2", 0, "2026-11-24", SWEEP16),
  ("strength", 0): T("strength_summary", None, "2026-11-25", CPU_CORE),
  ("strength", 1): T("strength_ablations_sv1", 2, "2026-11-25", CPU_CORE),
  ("strength", 2): T("strength_ablations_old", None, "2026-11-24", CPU_CORE, commit="d4ff39e"),
  ("strength", 3): T("strength_breakthrough_probe", 3, "2026-11-24", CPU2, seed=0),
  ("strength", 7): T(
    "strength_nannon_diagnosis",
    None,
    "2026-11-25",
    "cpu",
    seed=0,
    note="the checkpoint runs/strength_nannon_9b/seed0 (56,000 updates)",
  ),
  ("strength", 8): T("strength_nannon_probes", 7, "2026-11-25", CPU2, seed=0),
  ("strength", 9): T("strength_nannon_30min", None, "2026-11-25", CPU_CORE),
  ("strength", 10): T("strength_nannon_successor", 8, "2026-11-25", CPU_CORE, commit="f26f345"),
  ("strength", 11): T("strength_1256_probes", 9, "2026-11-25", CPU2, commit="112b124", seed=0),
  ("strength", 12): T("strength_1256_runs", 10, "2026-11-25", CPU_CORE, commit="b498f9e"),
}
# The tables drawn from typed records (below), by (doc, index) -> name.
TYPED = {
  ("accelerator", 0): "accelerator_scale",
  ("accelerator", 1): "accelerator_nannon",
  ("search", 0): "search_nannon",
  ("strength", 4): "strength_breakthrough_root",
  ("strength", 5): "strength_carchess_gumbel",
  ("strength", 6): "strength_carchess_long",
  ("strength", 13): "strength_1256_gumbel",
  ("strength", 14): "strength",
}
DOCS = sorted({d for d, _ in list(TRANSCRIBED) + list(TYPED)})


def _plain(text: str) -> str:
  return re.sub(r"[*`]", "", text).strip()


def _seed_of(head: Sequence[str], row: Sequence[str], default: Optional[int]) -> Optional[int]:
  if "seed" in head and re.fullmatch(r"\d+", row[head.index("seed")]):
    return int(row[head.index("seed")])
  if "overrides" in head:
    m = re.search(r"--seed (\d+)", row[head.index("overrides")])
    if m:
      return int(m[1])
  m = re.search(r"(?:^|[ _])s(\d)$", _plain(row[0]))
  return int(m[1]) if m else default


def _overrides_of(head: Sequence[str], row: Sequence[str]) -> List[str]:
  if "overrides" not in head:
    return []
  code = " ".join(re.findall(r"`([^`]*)`", row[head.index("overrides")]))
  return [t for t in code.split() if "=" in t and not t.startswith("(")]


def transcribe_tables() -> Dict[str, List[R.RunRecord]]:
  """{doc: records} of every transcribed table (its definition, with the
  table's header, is in docs/results/tables.yaml)."""
  out: Dict[str, List[R.RunRecord]] = {}
  for doc in DOCS:
    lines = doc_at(doc)
    blocks = code_blocks(lines)
    for index, (_, head, _, rows) in enumerate(tables_of(lines)):
      if (doc, index) in TYPED:
        continue
      t = TRANSCRIBED[(doc, index)]
      name, command = t.name, None if t.block is None else blocks[t.block]
      for row in rows:
        out.setdefault(doc, []).append(
          transcribed(
            name,
            _plain(row[0]),
            row,
            doc=doc,
            seed=_seed_of(head, row, t.seed),
            command=command,
            overrides=_overrides_of(head, row),
            device=t.device,
            commit=t.commit,
            date=t.date,
            note=t.note,
          )
        )
  return out


# ------------------------------------------------------------- strength ----

# Where and when each bar's runs trained (strength.md at 9faa6f9).
STRENGTH_AT = {
  "nannon_sv1": ("2026-11-25", None),
  "nannon_sv3": ("2026-11-25", "f26f345"),
  "nannon_k5": ("2026-11-25", "f26f345"),
  "nannon_gumbel": ("2026-11-25", None),
  "nannon_reanalyse": ("2026-11-25", None),
  "nannon_12_5_6": ("2026-11-25", "b498f9e"),
  "nannon_12_5_6_gumbel": ("2026-11-25", "2786e37"),
  "carchess": ("2026-11-24", None),
  "carchess_gumbel": ("2026-11-25", None),
  "carchess_long": ("2026-11-25", "8d46b52"),
  "einstein": ("2026-11-24", "f21ae3c"),
  "breakthrough": ("2026-11-25", "455f492"),
  "breakthrough_puct": ("2026-11-24", None),
  "breakthrough_gumbel": ("2026-11-25", "f2b1015"),
  "breakthrough_gumbel_t1": ("2026-11-25", "5e4e84e"),
  "catch": ("2026-11-24", None),
}
STRENGTH_COMMIT = {
  ("nannon_sv1", 0): "11ce966",
  ("nannon_sv1", 1): "f26f345",
  ("carchess", 0): "83b36e7",
  ("carchess", 1): "d860d3d",
  ("carchess_gumbel", 0): "455f492",
  ("carchess_gumbel", 1): "05a21e0",
}
STRENGTH_NOTE = {
  ("nannon_sv1", 0): "the file had weight 1; it ran as the bar `nannon`",
  ("nannon_sv1", 1): "the file had weight 1; the rerun that finished its schedule",
  ("nannon_k5", 1): "the file's weight was 1 then; the bar now adds "
  "`loss.successor_value_weight=1.0`, the same run",
  ("nannon_gumbel", 0): "trained at 2c70484-1fe4375, the same training code",
  ("nannon_gumbel", 1): "trained at 2c70484-1fe4375, the same training code",
  ("nannon_reanalyse", 0): "trained at 2c70484-1fe4375, the same training code",
  ("nannon_reanalyse", 1): "trained at 2c70484-1fe4375, the same training code",
  ("nannon_12_5_6", 0): "evaluated at 2c70484",
  ("nannon_12_5_6", 1): "evaluated at 2c70484",
  ("breakthrough_puct", 0): "at 89b7700-8f6d695, with the PUCT "
  "`anakin_mz/configs/breakthrough.yaml` of 8f6d695; it ran as the bar `breakthrough`",
  ("breakthrough_puct", 1): "at 89b7700-8f6d695, with the PUCT "
  "`anakin_mz/configs/breakthrough.yaml` of 8f6d695; it ran as the bar `breakthrough`",
  ("breakthrough_gumbel", 0): "when the file's temperature ended at 0.25",
  ("breakthrough_gumbel", 1): "when the file's temperature ended at 0.25",
}


def _evaluation(bar: strength.Bar, seed: int) -> Dict[str, object]:
  """A bar's evaluation settings, as `strength.to_record` gives them."""
  return {
    "measure": bar.measure,
    "target": bar.bar,
    "opponent": bar.opponent,
    "games": bar.games,
    "seed": seed,
  }


def _overrides_of_command(command: str) -> List[str]:
  return [t for t in command.split() if "=" in t and not t.startswith("--")]


def convert_strength_runs(bars: Dict[str, strength.Bar]) -> None:
  for path in sorted(
    glob.glob(os.path.join(RESULTS, "strength_runs", "*", "seed*", "strength.json"))
  ):
    name = path.split(os.sep)[-3]
    seed = int(path.split(os.sep)[-2][len("seed") :])
    with open(path, encoding="utf-8") as f:
      raw = json.load(f)
    date, commit = STRENGTH_AT[name]
    # As `strength.py` writes it now, then what the run kept elsewhere: its
    # own overrides (the bar's may have changed since), where and when.
    record = dataclasses.replace(
      strength.to_record(bars[name], seed, raw),
      overrides=tuple(_overrides_of_command(raw["command"])),
      device=CPU_CORE,
      commit=STRENGTH_COMMIT.get((name, seed), commit),
      date=date,
      source="converted",
      origin=path.replace(os.sep, "/"),
      note=STRENGTH_NOTE.get((name, seed), ""),
    )
    R.write(os.path.join(os.path.dirname(path), "record.jsonl"), [record])


def transcribe_strength_rows(bars: Dict[str, strength.Bar]) -> List[R.RunRecord]:
  """The strength table's rows whose runs are not in git, as typed records."""
  lines = doc_at("strength")
  _, head, _, rows = tables_of(lines)[14]
  commands = {}
  for line in lines:
    m = re.match(r"- (\w+), seed (\d): `([^`]*)`", line)
    if m:
      commands[(m[1], int(m[2]))] = m[3]
  have = {
    (p.split(os.sep)[-3], int(p.split(os.sep)[-2][4:]))
    for p in glob.glob(os.path.join(RESULTS, "strength_runs", "*", "seed*", "strength.json"))
  }
  out = []
  for row in rows:
    cell = dict(zip(head, row))
    name, seed = cell["bar"], int(cell["seed"])
    # The nannon rows are the nannon_sv3 runs (strength.md): drawn from those.
    if (name, seed) in have or name == "nannon":
      continue
    bar = bars[name]
    value = float(cell["score"])
    if cell["95% interval"] == "exact":
      figure = R.Figure(value)
    else:
      low, high = (float(x) for x in cell["95% interval"].strip("[]").split(","))
      figure = R.Figure(value, low, high)
    command = commands.get((name, seed))
    if name == "breakthrough_puct":
      command = commands[("breakthrough", seed)]
    date, commit = STRENGTH_AT[name]
    out.append(
      transcribed(
        "strength",
        name,
        None,
        doc="strength",
        seed=seed,
        command=command,
        overrides=_overrides_of_command(command),
        budget=R.Budget(
          minutes=bar.minutes,
          updates=int(cell["updates"]),
          train_minutes=float(cell["train wall-clock"].split()[0]),
        ),
        evaluation=_evaluation(bar, seed),
        figures={bar.measure: figure},
        device=CPU_CORE,
        commit=STRENGTH_COMMIT.get((name, seed), commit),
        date=date,
        note=STRENGTH_NOTE.get((name, seed), ""),
      )
    )
  return out


# ---------------------------------------------------------- accelerator ----

H200 = "gpu: one NVIDIA H200 (143,771 MiB), JAX 0.11.2, CUDA 13 plugin"
SCALE_COMMAND = (
  "python scripts/benchmark_scale.py --env nannon --lanes {lanes} --repeats 3 "
  "--json scale_{lanes}.json"
)


def _interp(points, x: float) -> float:
  """Linear interpolation of the sorted (x, y) `points` at x."""
  for (x0, y0), (x1, y1) in zip(points, points[1:]):
    if x0 <= x <= x1:
      return float(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
  raise ValueError(f"{x} is outside the logged steps")


def convert_accelerator() -> List[R.RunRecord]:
  out = []
  path = os.path.join(RESULTS, "accelerator", "scale_h200.json")
  with open(path, encoding="utf-8") as f:
    rows = json.load(f)
  for row in rows:
    out.append(
      R.RunRecord(
        experiment="accelerator_scale",
        variant=f"{row['lanes']} lanes",
        seed=None,
        command=SCALE_COMMAND.format(lanes=row["lanes"]),
        overrides=(),
        budget=R.Budget(),
        evaluation={**{k: row[k] for k in ("lanes", "devices", "batch_size")}, "gpu": "H200"},
        figures={
          k: R.Figure(float(row[k]))
          for k in (
            "env_steps_per_s",
            "updates_per_s",
            "step_s",
            "iterations",
            "sequential_ops",
            "unknown_loops",
          )
        },
        device=H200,
        commit="f57c191",
        date="2026-11-26",
        source="converted",
        origin=path.replace(os.sep, "/"),
        note="main after f57c191 (the device-local step, the presets); median of 3 timed steps",
        cells=None,
      )
    )
  for seed in (0, 1):
    path = os.path.join(RESULTS, "accelerator", f"nannon_h200_seed{seed}.json")
    with open(path, encoding="utf-8") as f:
      raw = json.load(f)
    logged = [(h["update_step"], h["env_steps"]) for h in raw["history"]]
    for point in raw["exact"]:
      step = int(point["update_step"])
      out.append(
        R.RunRecord(
          experiment="accelerator_nannon",
          variant=str(step),
          seed=seed,
          command=raw["command"],
          overrides=(),
          budget=R.Budget(
            minutes=float(raw["minutes"]),
            updates=step,
            env_steps=_interp(logged, step),
            train_minutes=point["wall_s"] / 60,
          ),
          evaluation={
            "scored": "exact, all 2,530 decision positions, on the CPU afterwards",
            "gpu": "H200",
          },
          figures={f"exact.{k}": R.Figure(float(v)) for k, v in point.items() if "_vs_" in k},
          device=H200,
          commit="f57c191",
          date="2026-11-26",
          source="converted",
          origin=path.replace(os.sep, "/"),
          note="train_minutes: from the start, compilation included; env_steps: "
          "interpolated between the logged steps around it",
          cells=None,
        )
      )
  return out


# --------------------------------------------------------------- search ----

SEARCH_VARIANTS = {
  "default": "",
  "sims50": "num_simulations=50",
  "sims100": "num_simulations=100",
  "chance_all16": "chance_mode=prior_minus_visits",
  "chance_all50": "chance_mode=prior_minus_visits num_simulations=50",
  "identity_argmax16": "identity_mode=argmax",
  "gumbel16": "root=gumbel",
  "gumbel50": "root=gumbel num_simulations=50",
  "bounds16": "value_bounds=[-1,1]",
  "bounds50": "value_bounds=[-1,1] num_simulations=50",
  "bounds_all16": "value_bounds=[-1,1] chance_mode=prior_minus_visits",
  "bounds_all50": "value_bounds=[-1,1] chance_mode=prior_minus_visits num_simulations=50",
  "bounds_all100": "value_bounds=[-1,1] chance_mode=prior_minus_visits num_simulations=100",
  "minmax_sample16": "value_bounds=null chance_mode=sample",
}
# The search table's rows (search.md at 9faa6f9) -> variant.
SEARCH_ROWS = [
  "minmax_sample16",
  "sims50",
  "sims100",
  "chance_all16",
  "chance_all50",
  "identity_argmax16",
  "gumbel16",
  "gumbel50",
  "bounds16",
  "bounds50",
  "bounds_all16",
  "bounds_all50",
  "bounds_all100",
  "bounds_c05_16",
]


SEARCH_C05 = ["search.value_bounds=[-1,1]", "search.pb_c_init=0.5"]


def _search_overrides(variant: str) -> List[str]:
  return [f"search.{i}" for i in SEARCH_VARIANTS.get(variant, "").split()]


def _search_command(variant: str, checkpoint: str) -> str:
  args = " ".join(f"--search {i}" for i in SEARCH_VARIANTS.get(variant, "").split())
  return (
    f"anakin-mz evaluate --checkpoint {checkpoint} --games 2 --extra-policies greedy,search"
    + (f" {args}" if args else "")
  )


def convert_search() -> List[R.RunRecord]:
  out = []
  for variant in SEARCH_VARIANTS:
    path = os.path.join(RESULTS, "search", "nannon_shipped", f"{variant}.json")
    with open(path, encoding="utf-8") as f:
      ev = json.load(f)
    out.append(
      R.RunRecord(
        experiment="search_nannon",
        variant=variant,
        seed=None,
        command=_search_command(variant, "nannon"),
        overrides=tuple(_search_overrides(variant)),
        budget=R.Budget(updates=int(ev["step"])),
        evaluation={
          "model": "shipped",
          "checkpoint": "nannon",
          "games": ev["games"],
          "seed": ev["seed"],
          "simulations": ev["simulations"],
        },
        figures=R.figures_of(ev),
        device=CPU_CORE,
        commit=None,
        date="2026-11-26",
        source="converted",
        origin=path.replace(os.sep, "/"),
        note="recorded in f416411 by docs/results/search/run.sh",
        cells=None,
      )
    )
  # The other two models' columns: a one-off script, not in git.
  _, head, _, rows = tables_of(doc_at("search"))[0]
  models = {1: "shipped", 2: "h200_seed0", 3: "cpu_seed2"}
  for variant, row in zip(SEARCH_ROWS, rows):
    for col in (2, 3):
      text = _plain(row[col])
      if not text:
        continue
      out.append(
        transcribed(
          "search_nannon",
          variant,
          None,
          doc="search",
          overrides=SEARCH_C05 if variant == "bounds_c05_16" else _search_overrides(variant),
          evaluation={"model": models[col], "seed": 0},
          figures={"exact.search_vs_optimal": R.Figure(float(text))},
          device="cpu",
          date="2026-11-26",
          note="a one-off script calling the same evaluator with the same search settings "
          "and key 0 (not in the repository; the H200 seed-0 params are not shipped)",
        )
      )
  return out


def main() -> int:
  bars = {b.name: b for b in strength.load_bars()}
  convert_strength_runs(bars)
  records_dir = os.path.join(RESULTS, "records")
  R.write(os.path.join(records_dir, "strength.jsonl"), transcribe_strength_rows(bars))
  R.write(os.path.join(records_dir, "accelerator.jsonl"), convert_accelerator())
  R.write(os.path.join(records_dir, "search.jsonl"), convert_search())
  for doc, rs in transcribe_tables().items():
    path = os.path.join(records_dir, f"{doc}.jsonl")
    if doc == "strength":
      rs = R.read(path) + rs
    R.write(path, rs)
  return 0


if __name__ == "__main__":
  sys.exit(main())
