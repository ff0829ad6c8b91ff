"""The Triton kernels of engine.model.gate_kernels (which documents them and calls them); imported where they first
run, so that the engine imports without Triton. exp is libdevice's, or numpy's under the interpreter
(engine.model.deltanet_step_triton); divisions round to nearest, as torch's CUDA kernels divide."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.model.deltanet_step_triton import exp
from engine.system.triton_rounding import rounded


@triton.jit
def silu_mul_kernel(gate_ptr, up_ptr, out_ptr, width, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = cols < width
    dtype = out_ptr.dtype.element_ty
    gate = tl.load(gate_ptr + row * width + cols, mask=ok, other=0.0).to(tl.float32)
    silu = rounded(tl.math.div_rn(gate, 1.0 + exp(-gate)), dtype)  # torch's silu: x / (1 + exp(-x))
    up = tl.load(up_ptr + row * width + cols, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + cols, rounded(silu * up, dtype).to(dtype), mask=ok)


@triton.jit
def sigmoid_gate_kernel(x_ptr, gate_ptr, out_ptr, gate_row_stride, gate_head_stride, HEAD: tl.constexpr,
                        BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    ok = cols < HEAD
    dtype = out_ptr.dtype.element_ty
    gate = tl.load(gate_ptr + row * gate_row_stride + head * gate_head_stride + cols, mask=ok, other=0.0)
    gate = gate.to(tl.float32)
    scale = rounded(tl.math.div_rn(1.0, 1.0 + exp(-gate)), dtype)  # torch's sigmoid: 1 / (1 + exp(-g))
    at = (row * tl.num_programs(1) + head) * HEAD + cols
    x = tl.load(x_ptr + at, mask=ok, other=0.0).to(tl.float32)
    tl.store(out_ptr + at, rounded(x * scale, dtype).to(dtype), mask=ok)
