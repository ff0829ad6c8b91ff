"""Whether Triton is installed, checked once per process: the engine's own GPU kernels (norms, decode
attention, KV writes, the device pager) need it; without it the op-for-op torch paths run."""

from __future__ import annotations

import importlib.util

HAS_TRITON = importlib.util.find_spec("triton") is not None
