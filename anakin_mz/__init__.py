"""Nondeterministic MuZero (NDMZ) in pure JAX, built the Anakin way."""

__version__ = "0.1.0"
