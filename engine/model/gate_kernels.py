"""Two elementwise gates of the hybrid layers (qwen3_next, qwen3_5_moe) as one Triton kernel each on CUDA (the Triton
interpreter runs them on the CPU for tests), in a launch-bound decode step:

- `silu_mul`: the gated shared expert's silu(gate) * up (torch: silu, mul);
- `sigmoid_gate`: GatedAttention's output times sigmoid of its gate, the gate read in place where q_proj's output
  holds it beside q (torch: a copy of the strided gate, sigmoid, mul).

Each op's rounding to the dtype is kept, in torch's order; silu and sigmoid in fp32 as torch's CUDA kernels compute
them (x / (1 + exp(-x)), 1 / (1 + exp(-x))). Elementwise: a row's bits do not depend on the other rows, no shape
depends on data (graphable)."""

from __future__ import annotations

import torch

from engine.system.triton_support import fused_step

BLOCK = 1024
NO_FUSION = {"enable_fp_fusion": False}
_built: dict = {}


def applies(x: torch.Tensor) -> bool:
    """Whether the hybrid layers' gates on x's device run the kernels: on CUDA where
    engine.system.triton_support.fused_step() (where Triton is installed); the CPU keeps the
    torch ops (tests run the kernels there under Triton's interpreter)."""
    return x.is_cuda and fused_step()


def _kernels():
    if not _built:
        import triton

        from engine.model import gate_triton as kernels

        _built.update(silu_mul=kernels.silu_mul_kernel, sigmoid_gate=kernels.sigmoid_gate_kernel, cdiv=triton.cdiv,
                      next_power_of_2=triton.next_power_of_2)
    return _built


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """gate, up [T, I] of one dtype -> silu(gate) * up [T, I]."""
    k = _kernels()
    gate, up = gate.contiguous(), up.contiguous()
    rows, width = gate.shape
    out = torch.empty_like(gate)
    if rows:
        k["silu_mul"][(rows, k["cdiv"](width, BLOCK))](gate, up, out, width, BLOCK=BLOCK, num_warps=4, **NO_FUSION)
    return out


def sigmoid_gate(x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    """x [T, H, hd] contiguous, gate [T, H, hd] of x's dtype (each head's channels contiguous, heads and tokens at any
    stride) -> x * sigmoid(gate) [T, H, hd]."""
    k = _kernels()
    rows, heads, width = x.shape
    if gate.stride(2) != 1:
        gate = gate.contiguous()
    out = torch.empty_like(x)
    if rows:
        k["sigmoid_gate"][(rows, heads)](x, gate, out, gate.stride(0), gate.stride(1), HEAD=width,
                                         BLOCK=k["next_power_of_2"](width), num_warps=4, **NO_FUSION)
    return out
