"""The dense expert kernels (engine.quant.dense_layout's compute): a gated MLP (engine.experts.formats.activation,
SwiGLU by default, optional per-expert biases) over packed bf16/fp16/fp32 blocks.

Shapes: T tokens, K routed experts per token, D hidden size, I expert intermediate size, n rows of one
expert's span; a block is [gate (I*D) | up (I*D) | down (D*I)].

Small steps run gathered_experts on CUDA (two batched GEMVs over a buffer of every entry's block, inside CUDA
graphs) and entry_experts on the CPU, where torch's batched GEMV is several times slower than one-row GEMMs and
the gathered copy costs as much again: there each (token, k) entry projects its token row through its expert's
block where the block lies, two one-row GEMMs per entry. Either way an entry's bits depend only on its token row
and its block, never on the step's other entries: a row gives the same bits alone, in a batch or beside its
drafts (a verify step's positions).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.experts.formats.activation import SILU_GLU, ExpertBias
from engine.experts.routing.dispatch import Dispatch


def gathered_experts(x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor, hidden: int,
                     intermediate: int, activation=SILU_GLU, bias: ExpertBias | None = None,
                     ids: torch.Tensor | None = None) -> torch.Tensor:
    """blocks [T*K, numel]: the packed expert of every (token, k) entry; ids [T, K] their expert ids (read only
    for the bias rows). -> weighted outputs [T, K, D]. Two batched GEMVs for the whole step."""
    T, K = weights.shape
    gate_up = blocks[:, : 2 * hidden * intermediate].view(T * K, 2 * intermediate, hidden)
    down = blocks[:, 2 * hidden * intermediate :].view(T * K, hidden, intermediate)
    rows = x.repeat_interleave(K, dim=0)[:, :, None]  # [T*K, D, 1]
    projected = torch.bmm(gate_up, rows)[:, :, 0]  # [T*K, 2I]
    if bias is not None:
        projected = projected + bias.gate_up[ids.reshape(-1)]
    y = torch.bmm(down, activation(projected)[:, :, None])[:, :, 0]  # [T*K, D]
    if bias is not None:
        y = y + bias.down[ids.reshape(-1)]
    return (y * weights.reshape(-1, 1)).to(x.dtype).view(T, K, hidden)


def entry_experts(x: torch.Tensor, blocks, weights: torch.Tensor, hidden: int, intermediate: int,
                  activation=SILU_GLU, bias: ExpertBias | None = None, ids: torch.Tensor | None = None) -> torch.Tensor:
    """gathered_experts' result where blocks is any sequence of the T*K entries' blocks [numel] (rows of a
    gathered buffer, or views of the rows of a table: nothing copied). -> weighted outputs [T, K, D]. Each
    entry's projections are one-row GEMMs of their own (the same call whatever T is), run expert by expert
    (entry_order); the activation, biases and weights run over the whole step's rows, element by element."""
    T, K = weights.shape
    split = 2 * hidden * intermediate
    order = entry_order(ids, T * K)
    projected = x.new_empty(T * K, 2 * intermediate)
    for i in order:
        torch.mm(x[i // K : i // K + 1], blocks[i][:split].view(2 * intermediate, hidden).t(),
                 out=projected[i : i + 1])
    if bias is not None:
        projected = projected + bias.gate_up[ids.reshape(-1)]
    h = activation(projected)  # [T*K, I]
    y = x.new_empty(T * K, hidden)
    for i in order:
        torch.mm(h[i : i + 1], blocks[i][split:].view(hidden, intermediate).t(), out=y[i : i + 1])
    if bias is not None:
        y = y + bias.down[ids.reshape(-1)]
    return (y * weights.reshape(-1, 1)).to(x.dtype).view(T, K, hidden)


def entry_order(ids: torch.Tensor | None, num_entries: int) -> list[int]:
    """The entries by expert id (stable): an expert's entries run one after another, so its block is read from
    memory once a step and from the cache for its other entries. Each entry's result does not depend on the order."""
    if ids is None:
        return list(range(num_entries))
    flat = ids.reshape(-1).tolist()
    return sorted(range(num_entries), key=flat.__getitem__)


def run_expert(gate_up, down, dispatch: Dispatch, u: int, out: torch.Tensor, activation=SILU_GLU,
               bias: ExpertBias | None = None) -> None:
    """Compute expert u of the dispatch in place in its span of out [T*K, D] (entries grouped by expert), which
    holds the span's token rows on entry (start_layer gathers them for every expert at once) and the weighted
    outputs on return: five kernels, no gather and no scatter per expert (under deterministic algorithms a
    scatter is CUDA's sort-based index_put_)."""
    span = dispatch.span(u)
    rows = out[span]  # [n, D], contiguous
    projected = F.linear(rows, gate_up)  # [n, 2I]: read before rows is overwritten below
    if bias is not None:
        expert = int(dispatch.experts[u])
        projected = projected + bias.gate_up[expert]
    torch.mm(activation(projected), down.t(), out=rows)  # F.linear(h, down) without its own buffer: the same GEMM
    if bias is not None:
        rows.add_(bias.down[expert])
    rows.mul_(dispatch.weights[span, None])  # as (y * w).to(out.dtype): computed in the wider type
