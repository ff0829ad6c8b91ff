"""Benchmark studies, probes and the report tool: run from the repository root (python -m bench.NAME); not part
of the installed package. `wisp bench` itself is engine.bench.suite."""
