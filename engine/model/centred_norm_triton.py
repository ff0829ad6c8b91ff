"""The Triton kernels of engine.model.centred_norm_kernels (which documents them and calls them); imported where they
first run, so that the engine imports without Triton. One program per row: the row's [next_pow2(D)] values over 4 or
8 warps, the sum of squares reduced inside the program."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.model.fused_add_norm import stored_sum
from engine.system.triton_rounding import rounded


@triton.jit
def centred_row(x, w_ptr, cols, ok, D, eps, offset, dtype: tl.constexpr):
    """x [BLOCK] fp32 (0 past D) -> x * rsqrt(mean(x^2) + eps) * (offset + w), rounded once to dtype, as fp32."""
    scale = tl.math.rsqrt(tl.sum(x * x, axis=0) / D + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0).to(tl.float32) + offset
    return rounded((x * scale) * w, dtype)


@triton.jit
def centred_norm_kernel(x_ptr, w_ptr, out_ptr, D, eps, offset, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    dtype = out_ptr.dtype.element_ty
    x = tl.load(x_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * D + cols, centred_row(x, w_ptr, cols, ok, D, eps, offset, dtype).to(dtype), mask=ok)


@triton.jit
def add_centred_norm_kernel(x_ptr, delta_ptr, w_ptr, sum_ptr, out_ptr, D, eps, offset, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < D
    dtype = out_ptr.dtype.element_ty
    x = stored_sum(x_ptr, delta_ptr, sum_ptr, row, cols, ok, D, dtype)
    tl.store(out_ptr + row * D + cols, centred_row(x, w_ptr, cols, ok, D, eps, offset, dtype).to(dtype), mask=ok)
