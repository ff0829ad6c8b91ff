"""A residual add and the RMSNorm of the sum as one Triton kernel on CUDA (-> both): in a decode step's layer the
add after attention and the post-attention norm, two launches as fused_norm's kernel and torch's add. The sum is
rounded to the input dtype as torch's add rounds it; the norm's arithmetic, layout (one [next_pow2(D)] row over
4 or 8 warps) and reduction are fused_norm's rms_norm's, so the bits are those of the add followed by
fused_rms_norm. Imported only where Triton is installed."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from engine.system.triton_rounding import rounded


@triton.jit
def stored_sum(x_ptr, delta_ptr, sum_ptr, row, cols, ok, D, dtype):
    """x + delta of one row, rounded to dtype as torch's add rounds it, stored at sum_ptr -> the sum in fp32."""
    x = tl.load(x_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32)
    delta = tl.load(delta_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32)
    x = rounded(x + delta, dtype)
    tl.store(sum_ptr + row * D + cols, x.to(dtype), mask=ok)
    return x


@triton.jit
def add_rms_norm(x_ptr, delta_ptr, w_ptr, sum_ptr, out_ptr, D, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    dtype = out_ptr.dtype.element_ty
    x = stored_sum(x_ptr, delta_ptr, sum_ptr, row, cols, ok, D, dtype)
    scale = tl.math.rsqrt(tl.sum(x * x, axis=0) / D + eps)
    y = rounded(x * scale, dtype)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * D + cols, rounded(w * y, dtype).to(dtype), mask=ok)


def fused_add_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, delta [..., D] contiguous in the weight's dtype -> (x + delta, weight * normalize(x + delta))."""
    D = x.shape[-1]
    total, out = torch.empty_like(x), torch.empty_like(x)
    add_rms_norm[(x.numel() // D,)](x, delta, weight, total, out, D, eps, BLOCK=triton.next_power_of_2(D),
                                    num_warps=4 if D <= 1024 else 8)
    return total, out
