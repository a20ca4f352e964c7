"""Test-session setup: a persistent XLA compilation cache shared by the test
processes of one run (subprocesses included), so identical programs (e.g. the same tiny training
config built by several tests) compile once; and XLA's cheap optimisation
level (`jax_disable_most_optimizations`: LLVM at -O0, no expensive passes)
for every test process, since the suite's time is mostly compiling tiny
programs that then run a few steps.

The HLO passes (fusion, layout, the collectives a sharded step holds) are
XLA's usual ones; only the machine code is less optimised, so every test
compares programs built alike. A module whose programs run long rather than
compile long (thousands of games against OpenSpiel, a search over every
position) says `pytestmark = pytest.mark.optimized` and gets XLA's default.

Measured (2026-11-27): twelve test files, the two arms at once, one per
core, cold caches: 971 s at the default level, 865 s with this one, where
the perfect-model search and the OpenSpiel differentials ran 2-3x slower
(62.6 s against 20.7 s the slowest), hence the marker. The whole suite from
a fresh clone (`.ci/run`, one after the other the same hour): pytest
1,483 s at the default level, 1,176 s with this one and the marker (the
tests' summed time 2,922 s against 2,289 s); TD(lambda)'s module, the one
module slower (47 s against 29 s), is marked too."""

import gc
import os
import tempfile

import jax
import pytest

# The agents register themselves when imported, as the command line imports
# them (`core.registry` loads none): every test reads them registered.
import anakin_mz.agents  # noqa: F401

_CACHE = os.environ.get("ANAKIN_MZ_TEST_XLA_CACHE") or os.path.join(
  tempfile.gettempdir(), "anakin_mz_test_xla_cache"
)
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
jax.config.update("jax_disable_most_optimizations", True)
# The tools the tests start as subprocesses (train.py, evaluate.py, the
# benchmarks) share it too: JAX reads these from the environment.
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1.0"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "1"


@pytest.fixture(autouse=True, scope="module")
def _xla_optimisation(request):
  """XLA's cheap level, or its default for a module marked `optimized`
  (module-scoped, so the module's own fixtures compile under it too)."""
  full = request.node.get_closest_marker("optimized") is not None
  jax.config.update("jax_disable_most_optimizations", not full)
  yield
  jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture(autouse=True, scope="module")
def _fresh_jax_caches():
  """Empties JAX's in-process caches (traces, lowerings, executables) after
  each module. A test process that keeps every module's programs alive runs
  each later trace slower: the same 34 tests (test_anakin, test_search, then
  six contract checks) took 117 s in one process and 68 s with this, on one
  pinned core (2026-11-29); a contract check took 2.9 s alone and 6.9 s
  after two modules. A program a later module needs again is traced again,
  and its compile (if it took over a second) comes from the persistent
  cache above."""
  yield
  jax.clear_caches()
  gc.collect()
