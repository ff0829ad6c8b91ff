"""Rounding inside Triton kernels that reproduce torch's op-by-op bits: a float32 value rounded to a tensor dtype
(to nearest even). bf16 is spelt out in bits because Triton's interpreter (the CPU tests) truncates on
.to(tl.bfloat16); engine.quant.triton_kernels rounds the same way. Imported only where Triton is installed."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def rounded(v, dtype: tl.constexpr):
    """float32 v rounded to dtype, as float32."""
    if dtype == tl.bfloat16:
        bits = v.to(tl.uint32, bitcast=True)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).to(tl.float32, bitcast=True)
    else:
        return v.to(dtype).to(tl.float32)
