"""Wisp's inference engine: runs MoE checkpoints with a paged expert working set. Never imports Qt."""

import os

# Each engine runs torch on its own thread, and libgomp keeps a spinning worker team per calling thread:
# after a few engines (model switches, tests) the idle teams' spinning slowed CPU decode 10-30x on 2 cores.
# Passive waiting must be chosen before torch loads OpenMP; an explicit user setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Deterministic cuBLAS (engine.runtime.determinism) needs this before the first cuBLAS call of the process.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

__version__ = "0.1.0"
