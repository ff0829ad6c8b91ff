"""Routing traces: format, recording, statistics. Torch-free (numpy only)."""
