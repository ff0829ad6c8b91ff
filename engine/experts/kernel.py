"""The dense expert kernels (engine.experts.dense_layout's compute): SwiGLU over packed bf16/fp16/fp32 blocks.

Shapes: T tokens, K routed experts per token, D hidden size, I expert intermediate size, n rows of one
expert's span; a block is [gate (I*D) | up (I*D) | down (D*I)].
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.experts.dispatch import Dispatch


def gathered_experts(x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor, hidden: int,
                     intermediate: int) -> torch.Tensor:
    """blocks [T*K, numel]: the packed expert of every (token, k) entry. -> weighted outputs [T, K, D].
    Two batched GEMVs for the whole step."""
    T, K = weights.shape
    gate_up = blocks[:, : 2 * hidden * intermediate].view(T * K, 2 * intermediate, hidden)
    down = blocks[:, 2 * hidden * intermediate :].view(T * K, hidden, intermediate)
    rows = x.repeat_interleave(K, dim=0)[:, :, None]  # [T*K, D, 1]
    gate, up = torch.bmm(gate_up, rows)[:, :, 0].chunk(2, dim=-1)  # [T*K, I] x2
    y = torch.bmm(down, (F.silu(gate) * up)[:, :, None])[:, :, 0]  # [T*K, D]
    return (y * weights.reshape(-1, 1)).to(x.dtype).view(T, K, hidden)


def run_expert(gate_up, down, dispatch: Dispatch, u: int, out: torch.Tensor) -> None:
    """Compute expert u of the dispatch in place in its span of out [T*K, D] (entries grouped by expert), which
    holds the span's token rows on entry (start_layer gathers them for every expert at once) and the weighted
    outputs on return: five kernels, no gather and no scatter per expert (under deterministic algorithms a
    scatter is CUDA's sort-based index_put_)."""
    span = dispatch.span(u)
    rows = out[span]  # [n, D], contiguous
    gate, up = F.linear(rows, gate_up).chunk(2, dim=-1)  # [n, I] x2: read before rows is overwritten below
    torch.mm(F.silu(gate) * up, down.t(), out=rows)  # F.linear(h, down) without its own buffer: the same GEMM
    rows.mul_(dispatch.weights[span, None])  # as (y * w).to(out.dtype): computed in the wider type
