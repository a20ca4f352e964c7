"""The README as a user reads it: its Python API block (load a config,
train, restore, evaluate) runs as written, on the tiny config of tiny.py
(every config the block loads gets `tiny.TINY`, `tiny.FIXED_SPAN` and a
budget of 4 updates appended to its overrides), in a scratch directory; the README stays within
250 lines, and its results table gives each bar one short row (the details
live behind the row's link, in docs/results)."""

import os
import re

import tiny

import anakin_mz

README = os.path.join(tiny.ROOT, "README.md")


def _readme() -> str:
  with open(README, encoding="utf-8") as f:
    return f.read()


def _api_block() -> str:
  blocks = re.findall(r"```python\n(.*?)```", _readme(), re.S)
  (block,) = [b for b in blocks if "anakin_mz.train(" in b]
  return block


def test_the_python_api_block_runs_as_written(tmp_path, monkeypatch, capsys):
  block = _api_block()
  for call in ("load_config(", "train(", "load_agent(", "evaluate_checkpoint("):
    assert f"anakin_mz.{call}" in block, call
  load = anakin_mz.load_config
  monkeypatch.setattr(
    anakin_mz,
    "load_config",
    # tiny.FIXED_SPAN: the Catch step test_anakin and test_robustness compile.
    lambda config, overrides=(): load(
      config, [*overrides, *tiny.TINY, tiny.FIXED_SPAN, "train.total_updates=4"]
    ),
  )
  monkeypatch.chdir(tmp_path)
  exec(compile(block, README, "exec"), {"__name__": "readme"})
  printed = capsys.readouterr().out.splitlines()[-3:]  # the block's three prints
  assert printed[0] == "4"  # result.saved_step: the budget's last update
  assert printed[1].startswith("[") and len(printed[1].strip("[]").split()) == 8  # 8 moves
  assert "'mean'" in printed[2] and "'low'" in printed[2]  # the score with its interval
  assert os.path.isdir(tmp_path / "runs" / "catch_py" / "checkpoints")


def test_the_readme_stays_short():
  assert len(_readme().splitlines()) <= 250


def test_each_results_row_is_one_short_line():
  text = _readme()
  table = text[text.index("| bar | figure |") :].split("\n\n", 1)[0].splitlines()
  assert len(table) > 10
  for row in table:
    assert len(row) <= 200, f"a results row of {len(row)} characters: {row[:80]}..."
    if not row.startswith("| bar") and not row.startswith("| ---"):
      assert "](docs/" in row, f"a results row without a link to its details: {row[:80]}"
