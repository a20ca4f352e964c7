"""Experiments over whole runs: several agents on one game with one budget
(`compare`), the strength bars (`strength`), and the timing and kernel
counts of the Anakin step (`profiling`)."""
