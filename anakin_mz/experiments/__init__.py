"""Experiments over whole runs: one pipeline from a spec (`spec`: base
config, variants, seeds, budget, evaluation, and an optional target, a bar
to reach: `target`) to run records (`records`, the one format every
experiment writes) to generated results tables (`tables`); an optional
schedule, rounds with a score between them (`schedule`, run by the engine
that puts several agents on one game with one budget, `compare`), and the
timing and kernel counts of the Anakin step (`profiling`)."""
