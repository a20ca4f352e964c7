"""Test-session setup: a persistent XLA compilation cache shared by the test
processes of one run (subprocesses included), so identical programs (e.g. the same tiny training
config built by several tests) compile once."""

import os
import tempfile

import jax

_CACHE = os.environ.get("ANAKIN_MZ_TEST_XLA_CACHE") or os.path.join(
  tempfile.gettempdir(), "anakin_mz_test_xla_cache"
)
jax.config.update("jax_compilation_cache_dir", _CACHE)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
# The tools the tests start as subprocesses (train.py, evaluate.py, the
# benchmarks) share it too: JAX reads these from the environment.
os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1.0"
os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
