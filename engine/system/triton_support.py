"""Whether Triton is installed, checked once per process: the engine's own GPU kernels (norms, decode
attention, KV writes, the device pager) need it; without it the op-for-op torch paths run."""

from __future__ import annotations

import importlib.util

HAS_TRITON = importlib.util.find_spec("triton") is not None


def fused_step() -> bool:
    """The decode step's fused kernels, on wherever Triton is installed: a
    router's selection in one kernel (engine.experts.routing.fused_router), a residual add and the next RMSNorm in
    one (engine.model.fused_add_norm), the q/k norm, RoPE and the KV write in one (engine.model.fused_qk_rope). Each
    call site takes them for CUDA tensors only, so the CPU keeps its torch ops; the same in every expert mode."""
    return HAS_TRITON


# The hybrid layers' norm, gate and MoE-end kernels (engine.model.centred_norm_kernels, gate_kernels,
# moe_tail_kernels) are checked on the CPU under Triton's interpreter only: they stay off on CUDA until
# `pytest -m gpu tests/gpu/test_hybrid_step_gpu.py tests/gpu/test_hybrid.py` has passed with this True on a GPU
# (benchmarks turn it on with `python -m bench.params engine.system.triton_support.HYBRID_STEP_KERNELS=True -- ...`).
HYBRID_STEP_KERNELS = False


def hybrid_step_kernels() -> bool:
    """Whether the hybrid layers' step kernels run on CUDA (HYBRID_STEP_KERNELS, read at each call)."""
    return HYBRID_STEP_KERNELS and HAS_TRITON
