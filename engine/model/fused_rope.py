"""RoPE (rotate_half style) as one Triton kernel on CUDA: engine.model.layers.apply_rope's op-for-op version is 5
kernels per tensor (x * cos, a negation, a cat, * sin, +), 10 per layer of a launch-bound decode step. The same
arithmetic, rounded to x's dtype after each product and after the sum as torch rounds it, so the bits are the
same. Channels past cos's width pass through (partial RoPE). Imported only where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.system.triton_rounding import rounded


@triton.jit
def rope_kernel(x_ptr, cos_ptr, sin_ptr, out_ptr, H, D, ROT: tl.constexpr, BD: tl.constexpr):
    """One (token, head): out = x * cos + rotate_half(x) * sin over the first ROT channels, x after them."""
    t = tl.program_id(0).to(tl.int64)
    row = (t * H + tl.program_id(1)) * D
    c = tl.arange(0, BD)
    turned = c < ROT
    half = ROT // 2
    dtype = out_ptr.dtype.element_ty
    x = tl.load(x_ptr + row + c, mask=c < D, other=0.0).to(tl.float32)
    partner = tl.load(x_ptr + row + tl.where(c < half, c + half, c - half), mask=turned, other=0.0).to(tl.float32)
    cos = tl.load(cos_ptr + t * ROT + c, mask=turned, other=0.0).to(tl.float32)
    sin = tl.load(sin_ptr + t * ROT + c, mask=turned, other=0.0).to(tl.float32)
    rotated = tl.where(c < half, -partner, partner)
    y = rounded(rounded(x * cos, dtype) + rounded(rotated * sin, dtype), dtype)
    tl.store(out_ptr + row + c, tl.where(turned, y, x).to(dtype), mask=c < D)


def fused_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, H, hd]; cos, sin [T, rotary_dim] in x's dtype -> apply_rope(x, cos, sin), one kernel."""
    T, H, D = x.shape
    out = torch.empty(T, H, D, dtype=x.dtype, device=x.device)
    rope_kernel[(T, H)](x.contiguous(), cos.contiguous(), sin.contiguous(), out, H, D, ROT=cos.shape[-1],
                        BD=triton.next_power_of_2(D), num_warps=1, enable_fp_fusion=False)
    return out
