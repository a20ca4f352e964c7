"""notebooks/colab_tpu.ipynb runs end to end, headless, on CPU with 8 forced
host devices and its tiny config (`ANAKIN_MZ_NOTEBOOK_TINY=1`): install step
skipped off Colab, devices, training through `anakin_mz.runtime.run.train`, the
TensorBoard cell, the checkpoint restored and evaluated with the exact score
against the optimal player."""

import os
import re
import shutil
import sys
import types

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NOTEBOOK = os.path.join(ROOT, "notebooks", "colab_tpu.ipynb")


def _text(cell):
  return "".join(o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream")


def test_colab_notebook_runs_on_8_cpu_devices(tmp_path, monkeypatch):
  # The kernel inherits the environment; it runs in a copy of notebooks/ so
  # its runs/ directory lands in tmp_path, with no checkout around it: the
  # config is found by name, as package data.
  work = tmp_path / "notebooks"
  work.mkdir()
  shutil.copy(NOTEBOOK, work)
  monkeypatch.setenv("ANAKIN_MZ_NOTEBOOK_TINY", "1")
  monkeypatch.setenv("ANAKIN_MZ_DEVICES", "8")
  monkeypatch.setenv("JAX_PLATFORMS", "cpu")
  monkeypatch.delenv("XLA_FLAGS", raising=False)
  nb = nbformat.read(str(work / "colab_tpu.ipynb"), as_version=4)
  NotebookClient(
    nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(work)}}
  ).execute()
  text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
  assert "8 CPU device(s)" in text, text
  assert len(re.findall(r"^  cpu:\d+$", text, flags=re.M)) == 8, text
  assert "starting nannon" in text and "on 8 devices" in text, text
  assert "last checkpoint at update 8" in text, text
  assert "restored update 8" in text, text
  assert "opponent    optimal" in text, text
  assert "exact win probability vs optimal: greedy 0." in text, text
  assert re.search(r"^anakin_mz \S+ from ", text, flags=re.M), text
  assert re.search(r"^measured: \d+ env steps/s", text, flags=re.M), text
  assert "preset cpu: 8 lanes, batch 16" in text, text
  assert os.path.isdir(tmp_path / "notebooks" / "runs" / "nannon_colab" / "checkpoints")


def _first_cell():
  nb = nbformat.read(NOTEBOOK, as_version=4)
  return next(c for c in nb.cells if c.cell_type == "code").source


def test_colab_install_needs_a_repo_url_and_no_restart(monkeypatch):
  """On Colab an empty REPO_URL (a form field) stops the run with a message
  saying what to fill in; the install is a plain `pip install` (an editable
  one would need a kernel restart before `import anakin_mz`)."""
  source = _first_cell()
  assert 'REPO_URL = ""  # @param {type:"string"}' in source
  assert "USE_DRIVE = False  # @param" in source
  install = [line for line in source.splitlines() if "pip install" in line]
  assert install and all(" -e " not in line for line in install), install
  monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
  code = TransformerManager().transform_cell(source)
  with pytest.raises(SystemExit, match="Set REPO_URL in this cell"):
    exec(code, {"get_ipython": lambda: None})
