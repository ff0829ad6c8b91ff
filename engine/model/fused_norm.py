"""RMSNorm as one Triton kernel on CUDA (the decode step is launch-bound: the op-for-op version is 7 kernels
and a step runs ~4 norms per layer). Same arithmetic as engine.model.layers.RMSNorm: fp32 mean of squares,
rsqrt, cast to the input dtype, times the weight in that dtype."""

from __future__ import annotations

import torch

from engine.system.triton_support import HAS_TRITON

_kernel = None


def _build():
    import triton
    import triton.language as tl

    @triton.jit
    def rms_norm(x_ptr, w_ptr, out_ptr, D, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK)
        ok = cols < D
        x = tl.load(x_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32)
        scale = tl.math.rsqrt(tl.sum(x * x, axis=0) / D + eps)
        y = (x * scale).to(out_ptr.dtype.element_ty).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
        tl.store(out_ptr + row * D + cols, (w * y).to(out_ptr.dtype.element_ty), mask=ok)

    return rms_norm


def fused_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """x [..., D] contiguous in the weight's dtype -> weight * normalize(x), one kernel."""
    global _kernel
    if _kernel is None:
        _kernel = _build()
    import triton

    D = x.shape[-1]
    out = torch.empty_like(x)
    _kernel[(x.numel() // D,)](x, weight, out, D, eps, BLOCK=triton.next_power_of_2(D), num_warps=4 if D <= 1024 else 8)
    return out


def can_fuse(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """The one-kernel path has no backward: training (grad enabled) keeps the op-for-op version."""
    return (HAS_TRITON and x.is_cuda and x.is_contiguous() and x.dtype == weight.dtype
            and not (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad)))
