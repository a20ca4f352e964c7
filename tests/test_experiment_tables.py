"""The generated results tables: `anakin-mz experiment tables` rebuilds exactly
the committed files from the run records in git (so a hand edit fails here),
the narrative documents hold no table of their own and link every generated
one, and a bad record or definition is a clear error."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil

import pytest
import tiny

from anakin_mz.cli import experiment as cli
from anakin_mz.experiments import records, tables

RESULTS = os.path.join(tiny.ROOT, "docs", "results")
DEFS = os.path.join(RESULTS, "tables.yaml")
OUT = os.path.join(RESULTS, "tables")


def test_the_committed_tables_are_exactly_what_the_records_give():
  assert tables.sync(DEFS, OUT, check=True) == []
  built = tables.build(DEFS)
  assert sorted(built) == sorted(os.listdir(OUT))
  for name, text in built.items():
    assert text.startswith(tables.HEADER + "\n"), name


def test_a_hand_edit_of_a_generated_table_is_caught(tmp_path, capsys):
  out = str(tmp_path / "tables")
  shutil.copytree(OUT, out)
  path = os.path.join(out, "strength.md")
  text = open(path, encoding="utf-8").read()
  with open(path, "w", encoding="utf-8") as f:
    f.write(re.sub(r"\| 0\.491( *)\|", r"| 0.495\1|", text, count=1))
  os.remove(os.path.join(out, "search_nannon.md"))
  assert cli.main(["tables", "--defs", DEFS, "--out", out, "--check"]) == 1
  printed = capsys.readouterr()
  assert (
    "would be changed strength.md" in printed.out and "would be new search_nannon.md" in printed.out
  )
  assert "never the generated files" in printed.err
  # Without --check the files are rebuilt, then all is in order.
  assert cli.main(["tables", "--defs", DEFS, "--out", out]) == 0
  assert tables.sync(DEFS, out, check=True) == []
  assert open(path, encoding="utf-8").read() == text


def test_the_narrative_holds_no_table_and_links_every_generated_one():
  linked = set()
  for doc in glob.glob(os.path.join(RESULTS, "*.md")):
    text = open(doc, encoding="utf-8").read()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    assert not rows, f"{doc} holds a hand-written table: {rows[0]}"
    linked |= set(re.findall(r"\]\(tables/([\w.-]+\.md)\)", text))
  for table in tables.load(DEFS):
    assert f"{table.name}.md" in linked, f"no document links tables/{table.name}.md"
    doc = open(os.path.join(RESULTS, table.doc), encoding="utf-8").read()
    assert f"(tables/{table.name}.md)" in doc, f"{table.doc} does not link {table.name}"


def test_every_record_in_git_reads_and_transcribed_rows_say_where_from():
  paths = glob.glob(os.path.join(RESULTS, "**", "*.jsonl"), recursive=True)
  assert len(paths) > 20
  for path in paths:
    for r in records.read(path):
      # Paths relative to the repository root: no record names the folders
      # of the machine that ran it.
      absolute = re.findall(r"(?<![^\s='\"])/\w[^\s'\"]*", r.command or "")
      assert not absolute, (path, r.variant, absolute)
      if r.transcribed:
        assert r.origin.endswith(" at 9faa6f9"), (path, r.variant)
      else:
        assert r.origin is None or os.path.exists(os.path.join(tiny.ROOT, r.origin))


def _line(**changes) -> str:
  record = records.RunRecord(
    experiment="e",
    variant="v",
    seed=0,
    command="anakin-mz train --env=catch",
    overrides=("train.td_steps=3",),
    budget=records.Budget(minutes=1.0, updates=8, env_steps=64.0, train_minutes=0.5),
    evaluation={"measure": "score", "target": 0.5},
    figures={"score": records.Figure(0.75, 0.5, 1.0), "exact.x": records.Figure(0.25)},
    device="cpu",
    commit="abc1234",
    date="2026-01-01",
    source="run",
    origin=None,
    note="",
    cells=None,
  )
  raw = records.to_dict(record)
  for key, value in changes.items():
    if value is KeyError:
      del raw[key]
    else:
      raw[key] = value
  return json.dumps(raw)


def test_records_round_trip_and_bad_lines_name_the_file_and_line(tmp_path):
  path = str(tmp_path / "r.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    f.write(_line() + "\n\n")
  (r,) = records.read(path)
  assert records.to_line(r) == _line() and r.figures["exact.x"].exact
  assert not r.figures["score"].exact and r.budget.updates == 8
  cases = [
    (_line(date=KeyError), r"r.jsonl:2: the record lacks field\(s\) \['date'\]"),
    (_line(colour=1), r"r.jsonl:2: the record has unknown field\(s\) \['colour'\]"),
    (_line(seed="0"), r"r.jsonl:2: field 'seed' must be an integer or null"),
    (_line(source="guess"), "field 'source' must be one of run, converted, transcribed"),
    (_line(budget={"minutes": 1}), r"budget lacks field\(s\) \['updates'"),
    (_line(figures={"s": {"value": 1, "low": 0}}), r"figure 's' lacks field\(s\) \['high'\]"),
    (_line(figures={"s": {"value": 1, "low": 0, "high": None}}), "give both low and high"),
    ('{"experiment": "e", ', r"r.jsonl:2: not JSON"),
    ("[1, 2]", "r.jsonl:2: a record must be a JSON object"),
  ]
  for bad, message in cases:
    with open(path, "w", encoding="utf-8") as f:
      f.write(_line() + "\n" + bad + "\n")
    with pytest.raises(records.RecordError, match=message):
      records.read(path)
  with pytest.raises(records.RecordError, match="cannot read records file"):
    records.read(str(tmp_path / "none.jsonl"))


def test_records_write_paths_relative_to_the_repository_root(tmp_path):
  """`new` and `imported` write a command's absolute paths relative to the
  root (`../runs/x` beside it); relative paths and paths that share no
  folder with the root stay; a record with absolute paths (written before)
  still reads."""
  root = str(tmp_path / "work" / "main")
  command = (
    f"anakin-mz train --config={root}/anakin_mz/configs/x.yaml --logdir {tmp_path}/work/runs/a/ "
    "--seed=0 && anakin-mz evaluate --checkpoint=runs/b/checkpoints --json=/dev/null"
  )
  want = (
    "anakin-mz train --config=anakin_mz/configs/x.yaml --logdir ../runs/a --seed=0 && "
    "anakin-mz evaluate --checkpoint=runs/b/checkpoints --json=/dev/null"
  )
  assert records.repo_command(command, root) == want
  assert records.repo_command(want, root) == want and records.repo_command(None, root) is None
  assert records.repo_path(os.path.join(root, "docs"), root) == "docs"
  # `new` writes them relative to this checkout's root, wherever it is.
  here = records.repo_root()
  assert here == tiny.ROOT
  made = records.new("e", "v", 0, command=f"anakin-mz train --logdir={here}/runs/x")
  assert made.command == "anakin-mz train --logdir=runs/x"
  # A record of before, its paths absolute, reads; `imported` makes them relative.
  path = str(tmp_path / "old.jsonl")
  with open(path, "w", encoding="utf-8") as f:
    f.write(_line(command=f"anakin-mz train --logdir={here}/runs/y") + "\n")
  (old,) = records.read(path)
  assert old.command == f"anakin-mz train --logdir={here}/runs/y"
  assert records.imported(old, "e").command == "anakin-mz train --logdir=runs/y"


def test_grid_draws_a_pipe_table_and_refuses_what_is_not_one():
  text = tables.grid(["a", "bb"], [["x", "1,000"], ["yyyy", ""]], ["left", "right"])
  assert text.splitlines() == [
    "| a    |    bb |",
    "|:-----|------:|",
    "| x    | 1,000 |",
    "| yyyy |       |",
  ]
  assert tables.grid(["n"], [["007"]]).splitlines()[2] == "| 007 |"  # text, never parsed
  for args, message in (
    ((["a"], [["x", "y"]]), "a row of 2 cells under 1 heads"),
    ((["a"], [["x"]], ["middle"]), "align must give one of left, right per column"),
    ((["a", "b"], [["x", "y"]], ["left"]), "align must give one of left, right per column"),
    ((["a"], [["two\nlines"]]), "a cell holds a line break"),
  ):
    with pytest.raises(ValueError, match=message):
      tables.grid(*args)


def _defs(tmp_path, body: str, lines=()) -> str:
  with open(tmp_path / "r.jsonl", "w", encoding="utf-8") as f:
    f.writelines(line + "\n" for line in lines)
  (tmp_path / "tables.yaml").write_text(body, encoding="utf-8")
  return str(tmp_path / "tables.yaml")


def test_templates_format_figures_intervals_and_missing_cells(tmp_path):
  lines = [_line(), _line(seed=1, figures={}, note="n"), _line(variant="w", seed=None)]
  body = (
    "tables:\n  - name: t\n    title: T\n    doc: d.md\n    records: r.jsonl\n    experiment: e\n"
    "    variants: [shown=v]\n"
    "    columns:\n"
    '      - {head: run, cell: "{variant} {seed}"}\n'
    '      - {head: score, cell: "{measure:vci.2f}", align: right}\n'
    '      - {head: ci, cell: "{fig[score]:ci.1f} {fig[exact.x]:ci.1f} {fig[exact.x]:*.2f}"}\n'
    '      - {head: met, cell: "{met} {target:g} {budget.env_steps:k.3f} {note: (|)}"}\n'
    "    override: {shown/1: {run: x}}\n"
  )
  text = tables.build(_defs(tmp_path, body, lines))["t.md"]
  assert tiny.cells(text) == [
    ("run", "score", "ci", "met"),
    ("---", "---:", "---", "---"),
    ("shown 0", "0.75 [0.50, 1.00]", "[0.5, 1.0] exact **0.25**", "yes 0.5 0.064k"),
    ("x", "", "", "0.5 0.064k  (n)"),  # no figures: empty cells, the note; no w (not shown)
  ]
  # Drawn by tabulate: each column padded to its widest cell, aligned as asked.
  assert "\n| run     |             score |" in text and "|:--------|------------------:|" in text
  # rows: variants puts a variant's seeds side by side.
  body = (
    "tables:\n  - name: t\n    title: T\n    doc: d.md\n    records: r.jsonl\n    experiment: e\n"
    "    rows: variants\n"
    '    columns: [{head: v, cell: "{variant}: {by[0].measure:.2f}/{by[1].measure:.2f}'
    '/{by[7].seed}"}]\n'
  )
  text = tables.build(_defs(tmp_path, body, lines))["t.md"]
  assert tiny.cells(text)[2:] == [("v: 0.75//",), ("w: //",)]


@pytest.mark.parametrize(
  "body, message",
  [
    ("nothing: 1", "list under 'tables'"),
    ("tables: [{name: t, colour: 1}]", r"unknown key\(s\) \['colour'\]"),
    ("tables: [{name: t, title: T}]", r"missing key\(s\) \['doc', 'records'"),
    (
      "tables: [{name: t, title: T, doc: d, records: none.jsonl, experiment: e, columns: [a]}]",
      "no records file matches 'none.jsonl'",
    ),
    (
      "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e, columns: [a],"
      " variants: [zz]}]",
      "no record of variant 'zz'",
    ),
    (
      "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e, columns: [a]}]",
      "no template, and the row .* is not a transcribed one",
    ),
    (
      "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e,"
      " columns: [{head: a, cell: '{budget.hours}'}]}]",
      r"column 'a', row 'v/0': template '\{budget.hours\}' fails: AttributeError",
    ),
    (
      "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e,"
      " columns: [{head: a, cell: '{seed}', align: centre}]}]",
      "align must be one of left, right, got 'centre'",
    ),
    (
      "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e,"
      ' columns: [{head: a, cell: "{seed}\\n{seed}"}]}]',  # YAML: a line break
      "table 't': a cell holds a line break",
    ),
  ],
)
def test_a_bad_definition_is_a_clear_error(tmp_path, body, message):
  with pytest.raises(ValueError, match=message):
    tables.build(_defs(tmp_path, body, [_line()]))


def test_a_record_missing_a_field_stops_the_tables_command(tmp_path, capsys):
  body = (
    "tables: [{name: t, title: T, doc: d, records: r.jsonl, experiment: e,"
    " columns: [{head: a, cell: '{seed}'}]}]"
  )
  defs = _defs(tmp_path, body, [_line(), _line(budget=KeyError)])
  assert cli.main(["tables", "--defs", defs, "--out", str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err
  assert re.search(r"error: .*r\.jsonl:2: the record lacks field\(s\) \['budget'\]", err)
  assert "Traceback" not in err and not os.path.exists(tmp_path / "out")
  assert cli.main(["tables", "--defs", str(tmp_path / "none.yaml")]) == 2
  assert "cannot read table definitions" in capsys.readouterr().err


def test_compare_writes_records_that_read_back(tmp_path):
  from anakin_mz.experiments import compare

  spec = {
    "config": "/c.yaml",
    "overrides": ["train.td_steps=3"],
    "budget": {"unit": "env_steps", "total": 2e5, "every": 1e5},
    "eval_games": 8,
  }
  row = {"update_step": 4, "env_steps": 64.0, "train_s": 30.0, "exact/greedy_vs_optimal": 0.4}
  run = compare.RunSpec("ndmz", 1, ("search.num_simulations=8",))
  config = tiny.tiny_config("catch")
  c = compare._record(str(tmp_path / "cmp"), run, row, spec, config)
  assert (c.experiment, c.variant, c.seed) == ("cmp", "ndmz_search.num-simulations-8", 1)
  assert "--agents=ndmz:search.num_simulations=8 --seeds=1 --env-steps=200000" in c.command
  assert c.budget.train_minutes == 0.5 and c.figures["exact/greedy_vs_optimal"].value == 0.4
  path = str(tmp_path / "r.jsonl")
  records.append(path, c)
  assert records.read(path) == [c]


def test_import_puts_run_records_under_a_table_once(tmp_path, capsys):
  """`experiment import`: a run directory's records under the table's
  experiment and variant, with the round of 300 games each reached; a
  record already there is skipped; bad input is a clear error."""
  run = records.new(
    "p636_az_s0",
    "alphazero_search.tree-ndmz",
    0,
    command="anakin-mz compare ...",
    evaluation={"games": 1000, "games_played": 29_946.0},
    figures={"match/search_vs_optimal": records.Figure(0.49, 0.46, 0.52)},
    device="CPU",
    commit="abc1234",
    date="2026-11-28",
  )
  source, into = str(tmp_path / "run.jsonl"), str(tmp_path / "paper.jsonl")
  records.append(source, run)
  records.append(source, records.imported(run, "p636_az_s0", note="a later point"))
  argv = ["import", source, "--into", into, "--experiment", "paper_636"]
  argv += ["--variant", "alphazero", "--round-games", "300", "--device", "CPU: 1 core"]
  assert cli.main(argv) == 0
  assert "2 record(s) added, 0 already there" in capsys.readouterr().out
  got = records.read(into)
  assert [(r.experiment, r.variant, r.seed, r.device) for r in got] == [
    ("paper_636", "alphazero", 0, "CPU: 1 core")
  ] * 2
  assert got[0].evaluation == {"games": 1000, "games_played": 29_946.0, "round": 100}
  assert (got[0].figures, got[0].commit, got[0].note) == (run.figures, "abc1234", "")
  assert cli.main(argv) == 0  # again: nothing new
  assert "0 record(s) added, 2 already there" in capsys.readouterr().out
  assert len(records.read(into)) == 2
  # No games played, no round; a bad round; an unreadable source.
  bare = str(tmp_path / "bare.jsonl")
  records.append(bare, records.new("x", "v", 0, command=None))
  for bad, message in (
    ([bare, "--round-games", "300"], "has no games played, so no round"),
    ([source, "--round-games", "0"], "the games of a round must be > 0"),
    ([str(tmp_path / "none.jsonl")], "cannot read records file"),
  ):
    assert cli.main(["import", *bad, "--into", into, "--experiment", "e"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
  assert len(records.read(into)) == 2


def test_a_record_names_the_commit_of_the_code_that_ran_not_of_the_cwd(tmp_path, monkeypatch):
  """The experiment and compare tools record the commit of the
  checkout the package runs from, wherever the command is started."""
  here = records.git_commit(tiny.ROOT)
  if here is None:
    pytest.skip("the tests do not run from a git checkout")
  monkeypatch.chdir(tmp_path)  # not a checkout
  assert records.git_commit(str(tmp_path)) is None
  assert records.git_commit() == here
