"""Whether Triton is installed, checked once per process: the engine's own GPU kernels (norms, decode
attention, KV writes, the device pager) need it; without it the op-for-op torch paths run."""

from __future__ import annotations

import importlib.util

HAS_TRITON = importlib.util.find_spec("triton") is not None


def fused_step() -> bool:
    """The decode step's fused kernels, on wherever Triton is installed: a
    router's selection in one kernel (engine.experts.routing.fused_router), a residual add and the next RMSNorm in
    one (engine.model.fused_add_norm), the q/k norm, RoPE and the KV write in one (engine.model.fused_qk_rope), and
    the hybrid layers' zero-centred norms, gates and MoE tail (engine.model.centred_norm_kernels, gate_kernels,
    moe_tail_kernels). Each call site takes them for CUDA tensors only, so the CPU keeps its torch ops; the same in
    every expert mode."""
    return HAS_TRITON

