"""The end of a decode step's MoE layer with a gated shared expert (qwen3_next, qwen3_5_moe: GatedSharedExpert) as
one Triton kernel on CUDA (the Triton interpreter runs it on the CPU for tests): the residual plus the routed
experts plus sigmoid(gate) times the shared expert. Op by op that is 4 launches (sigmoid, mul, the experts' add and
the residual add) in a launch-bound step. Each op's rounding to the dtype is kept, in torch's order:
x + (routed + sigmoid(gate) * shared); sigmoid is 1 / (1 + exp(-g)) in fp32 as torch's CUDA kernel computes it.
Elementwise: a row's bits do not depend on the other rows, no shape depends on data (graphable)."""

from __future__ import annotations

from typing import NamedTuple

import torch

from engine.system.triton_support import fused_step

BLOCK = 1024
NO_FUSION = {"enable_fp_fusion": False}
_built: dict = {}


class GatedShared(NamedTuple):
    """A gated shared expert's output not yet scaled: its gate logit [T, 1] and its expert's output [T, D]."""

    gate: torch.Tensor
    out: torch.Tensor


def applies(x: torch.Tensor) -> bool:
    """Whether a hybrid MoE layer's decode step ends in the fused kernel on x's device: on CUDA where
    engine.system.triton_support.fused_step() (where Triton is installed); the CPU keeps the
    torch ops (tests run the kernel there under Triton's interpreter)."""
    return x.is_cuda and fused_step()


def _kernels():
    if not _built:
        import triton

        from engine.model import moe_tail_triton as kernels

        _built.update(sum=kernels.gated_residual_sum_kernel, cdiv=triton.cdiv)
    return _built


def gated_residual_sum(x: torch.Tensor, routed: torch.Tensor, shared: GatedShared,
                       out: torch.Tensor | None = None) -> torch.Tensor:
    """x, routed [T, D] and shared's [T, D] output of one dtype, its gate [T, 1] ->
    x + (routed + sigmoid(gate) * shared) [T, D], into out if given."""
    k = _kernels()
    rows, width = x.shape
    if out is None:
        out = torch.empty_like(x)
    if rows:
        k["sum"][(rows, k["cdiv"](width, BLOCK))](x.contiguous(), routed.contiguous(), shared.gate.contiguous(),
                                                  shared.out.contiguous(), out, width, BLOCK=BLOCK, num_warps=4,
                                                  **NO_FUSION)
    return out
