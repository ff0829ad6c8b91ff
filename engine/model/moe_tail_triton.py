"""The Triton kernel of engine.model.moe_tail_kernels (which documents it and calls it); imported where it first
runs, so that the engine imports without Triton. exp is libdevice's (torch's CUDA sigmoid calls the same expf), or
numpy's under the interpreter (engine.model.deltanet_step_triton)."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.model.deltanet_step_triton import exp
from engine.system.triton_rounding import rounded


@triton.jit
def gated_residual_sum_kernel(x_ptr, routed_ptr, gate_ptr, shared_ptr, out_ptr, D, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < D
    dtype = out_ptr.dtype.element_ty
    gate = tl.load(gate_ptr + row).to(tl.float32)
    scale = rounded(tl.math.div_rn(1.0, 1.0 + exp(-gate)), dtype)  # torch's sigmoid: 1 / (1 + exp(-g))
    shared = rounded(scale * tl.load(shared_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32), dtype)
    experts = rounded(tl.load(routed_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32) + shared, dtype)
    out = rounded(tl.load(x_ptr + row * D + cols, mask=ok, other=0.0).to(tl.float32) + experts, dtype)
    tl.store(out_ptr + row * D + cols, out.to(dtype), mask=ok)
