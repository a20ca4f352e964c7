"""notebooks/colab_tpu.ipynb runs end to end, headless, on CPU with 8 forced
host devices and its tiny config (`ANAKIN_MZ_NOTEBOOK_TINY=1`): install step
skipped off Colab, devices, TensorBoard started before training, training
through `anakin_mz.runtime.run.train`, the checkpoint restored and evaluated
with the exact score against the optimal player; run again on 2 devices it
resumes with the checkpoint's sizes. The first cell's install decision and
the backend check run here with fake runtimes (no pip install: no network)."""

import os
import re
import shutil
import sys
import tomllib
import types

import nbformat
import pytest
from IPython.core.inputtransformer2 import TransformerManager
from nbclient import NotebookClient

# One worker runs the module, so that the notebook's first run (a module
# fixture: 70 s of CI, cold cache) is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("notebook")

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
NOTEBOOK = os.path.join(ROOT, "notebooks", "colab_tpu.ipynb")


def _text(cell):
  return "".join(o.get("text", "") for o in cell.get("outputs", []) if o["output_type"] == "stream")


def _execute(work, devices: int) -> str:
  """Runs the notebook in `work` (its runs/ directory lands there; no
  checkout around it, so the config is found by name, as package data) on
  `devices` forced CPU devices; the text its code cells printed."""
  with pytest.MonkeyPatch.context() as mp:  # the kernel inherits the environment
    mp.setenv("ANAKIN_MZ_NOTEBOOK_TINY", "1")
    mp.setenv("ANAKIN_MZ_DEVICES", str(devices))
    mp.setenv("JAX_PLATFORMS", "cpu")
    mp.delenv("XLA_FLAGS", raising=False)
    nb = nbformat.read(str(work / "colab_tpu.ipynb"), as_version=4)
    NotebookClient(
      nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    ).execute()
  return "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
  """The notebook run once on 8 forced devices: (its notebooks/ copy, its text)."""
  work = tmp_path_factory.mktemp("first") / "notebooks"
  work.mkdir()
  shutil.copy(NOTEBOOK, work)
  return work, _execute(work, 8)


def test_colab_notebook_runs_on_8_cpu_devices(first_run):
  work, text = first_run
  assert "8 CPU device(s)" in text, text
  assert len(re.findall(r"^  cpu:\d+$", text, flags=re.M)) == 8, text
  assert "TensorBoard: tensorboard --logdir runs/nannon_colab" in text, text
  assert "starting nannon" in text and "on 8 devices" in text, text
  assert "last checkpoint at update 8" in text, text
  assert "restored update 8" in text, text
  assert "opponent    optimal" in text, text
  assert "exact win probability vs optimal: greedy 0." in text, text
  assert re.search(r"^anakin_mz \S+ from ", text, flags=re.M), text
  assert re.search(r"^measured: \d+ env steps/s", text, flags=re.M), text
  # One lane per device, as the accelerator preset sizes by the device count.
  assert "preset per-device: 8 lanes, batch 16" in text, text
  assert os.path.isdir(work / "runs" / "nannon_colab" / "checkpoints")


@pytest.mark.slow  # a second run of the notebook: 60 s of CI (cold cache)
def test_colab_notebook_resumes_on_another_device_count(first_run, tmp_path):
  """Run again on 2 devices, the notebook continues the 8-device run at its
  8 lanes and batch 16 (a preset recomputed for 2 devices would make 2
  lanes and batch 4, and `run.train` would refuse the config)."""
  work = tmp_path / "notebooks"
  shutil.copytree(first_run[0], work)
  text = _execute(work, 2)
  assert "2 CPU device(s)" in text, text
  assert len(re.findall(r"^  cpu:\d+$", text, flags=re.M)) == 2, text
  line = "resuming nannon in runs/nannon_colab on 2 devices, the checkpoint's sizes (update 8): "
  assert line + "8 lanes, batch 16" in text, text
  assert "last checkpoint at update 16" in text, text
  assert "restored update 16" in text, text
  assert "exact win probability vs optimal: greedy 0." in text, text


def _code_cells():
  nb = nbformat.read(NOTEBOOK, as_version=4)
  return [c.source for c in nb.cells if c.cell_type == "code"]


def _first_cell():
  return _code_cells()[0]


def _run_first_cell(source, ipython=None):
  """The first cell's namespace after running it here, its `!` lines sent
  to `ipython.system` (a fake: nothing is installed)."""
  namespace = {"get_ipython": lambda: ipython}
  exec(TransformerManager().transform_cell(source), namespace)
  return namespace


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
  with pytest.raises(SystemExit, match="Set REPO_URL in this cell"):
    _run_first_cell(source)


@pytest.fixture
def cell(monkeypatch):
  """The first cell's namespace, run off Colab (it installs nothing)."""
  monkeypatch.delitem(sys.modules, "google.colab", raising=False)
  return _run_first_cell(_first_cell())


def _exists(*paths):
  return lambda path: path in paths


def test_the_install_keeps_the_accelerated_jax(cell):
  """A GPU runtime asks pip for jax with its CUDA extra, a TPU runtime for
  jax[tpu], each at the installed version (so pip keeps Colab's build); an
  installed jax outside anakin-mz's range is not pinned, but still asked
  for with the accelerated extra, never as a plain CPU `jax`."""
  req = cell["install_requirements"]
  cuda = {"jax": "0.10.2", "jax-cuda12-plugin": "0.10.2"}
  env = {"PATH": "/usr/bin"}
  assert req(env, _exists("/dev/nvidia0"), cuda) == ["jax[cuda12]==0.10.2"]
  on_path = {"PATH": f"/usr/local/bin{os.pathsep}/opt/bin"}  # no /dev/nvidia0, nvidia-smi on PATH
  assert req(on_path, _exists("/opt/bin/nvidia-smi"), cuda) == ["jax[cuda12]==0.10.2"]
  cuda13 = {"jax": "0.11.2", "jax-cuda13-plugin": "0.11.2"}
  assert req(env, _exists("/dev/nvidia0"), cuda13) == ["jax[cuda13]==0.11.2"]
  assert req(env, _exists("/dev/nvidia0"), {}) == ["jax[cuda12]>=0.10,<0.12"]
  old = {"jax": "0.4.33", "jax-cuda12-plugin": "0.4.33"}
  assert req(env, _exists("/dev/nvidia0"), old) == ["jax[cuda12]>=0.10,<0.12"]
  assert req(env, _exists("/dev/accel0"), {"jax": "0.10.2"}) == ["jax[tpu]==0.10.2"]
  assert req(env, _exists("/dev/vfio/0"), {"jax": "0.11.0"}) == ["jax[tpu]==0.11.0"]
  tpu_env = {"PATH": "/usr/bin", "COLAB_TPU_ADDR": "10.0.0.2:8470"}
  assert req(tpu_env, _exists(), {"jax": "0.10.2"}) == ["jax[tpu]==0.10.2"]
  assert req(env, _exists(), {"jax": "0.10.2"}) == ["jax==0.10.2"]  # a CPU runtime
  assert req(env, _exists(), {"jax": "0.12.0"}) == ["jax>=0.10,<0.12"]


def test_the_install_line_on_a_gpu_runtime_asks_for_jax_cuda(monkeypatch, tmp_path):
  """A dry run of the first cell on a fake Colab GPU runtime (`nvidia-smi`
  on PATH): the `!pip install` line gets the installed jax with its CUDA
  extra, pinned, and the package from REPO_URL."""
  smi = tmp_path / "nvidia-smi"
  smi.write_text("#!/bin/sh\n")
  monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
  monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
  commands = []
  ipython = types.SimpleNamespace(system=commands.append)
  url = "https://github.com/someone/anakin-mz"
  source = _first_cell().replace('REPO_URL = ""', f'REPO_URL = "{url}"', 1)
  ns = _run_first_cell(source, ipython)
  assert commands == ["pip install -q {PIP_ARGS}"], commands
  jax_version = ns["installed"]["jax"]
  assert ns["ACCELERATOR"] == "gpu"
  assert re.fullmatch(
    rf"'jax\[cuda1[23]\]=={re.escape(jax_version)}' 'anakin-mz @ git\+{re.escape(url)}'",
    ns["PIP_ARGS"],
  ), ns["PIP_ARGS"]


def test_the_notebook_jax_range_is_the_package_s(cell):
  with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
    dependencies = tomllib.load(f)["project"]["dependencies"]
  low, high = cell["JAX_RANGE"]
  assert f"jax>={low},<{high}" in dependencies, dependencies


def test_a_cpu_backend_on_an_accelerator_runtime_stops_the_run(cell):
  """One message that says what is wrong and how to fix it; nothing off
  Colab (CI forces the CPU on any machine) or where the backend is the
  accelerator."""
  check = cell["check_backend"]
  with pytest.raises(SystemExit, match=r"GPU runtime, but JAX runs on the CPU") as e:
    check(True, "gpu", "cpu")
  assert "jax[cuda12]" in str(e.value) and "Restart session" in str(e.value)
  with pytest.raises(SystemExit, match=r"TPU runtime, but JAX runs on the CPU.*jax\[tpu\]"):
    check(True, "tpu", "cpu")
  assert check(True, "gpu", "gpu") is None
  assert check(True, "tpu", "tpu") is None
  assert check(True, None, "cpu") is None
  assert check(False, "gpu", "cpu") is None


def test_tensorboard_starts_before_training():
  cells = _code_cells()
  tensorboard = next(i for i, c in enumerate(cells) if '"tensorboard", f"--logdir' in c)
  train = next(i for i, c in enumerate(cells) if "run.train(" in c)
  devices = next(i for i, c in enumerate(cells) if "check_backend(IN_COLAB" in c)
  assert devices < tensorboard < train
