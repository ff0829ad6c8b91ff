"""The expert storage format: how one expert's weights sit in its block, and the compute that reads them.

Every provider keeps experts as rows of [E, numel] tensors of the layout's dtype (pinned host memory, device
slots, a gathered buffer) and moves whole rows: a miss is one copy whatever the format. Only the layout knows
what a row holds, so a new format (say, a quantized GGUF block holding three quantized tensors) is one new
class with its own fused kernels; the providers call it without knowing its type.

Bit identity across providers holds because each provider computes through the same layout methods:
`run_gathered`/`run_rows` for small steps (every (token, k) entry's block: a gathered buffer, or on the CPU the
dense layout's rows read in place) and `run_group` for large steps
(a group of experts, each over its span of token rows: on CUDA one grouped GEMM launch per projection, elsewhere
`run_expert` one expert at a time). A group's results never depend on which other experts share it."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from engine.experts.routing.dispatch import (Dispatch, combine, combine_grouped, is_small_step, start_layer,
                                             start_layer_on_device)


class ExpertLayout(Protocol):
    """What providers need from an expert storage format."""

    numel: int  # elements of one expert's block (one row of a [E, numel] tensor)
    dtype: torch.dtype  # the block's element type (bf16 for dense weights, uint8 for quantized blocks)
    expert_bytes: int  # bytes of one expert's block: what a miss copies (read every layer-step: keep it a field)

    def for_layer(self, layer: int) -> "ExpertLayout":
        """The layout of one MoE layer's blocks. Quantized files mix types by layer (a Q4_K_M file's ffn_down is
        Q6_K in some layers, Q4_K in others): every layer's blocks are rows of the same size, but only the layer's
        own layout knows what its rows hold. Providers compute through this, never through a store-wide layout."""
        return self

    def run_gathered(self, x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor,
                     ids: torch.Tensor | None = None) -> torch.Tensor:
        """Small step. x [T, D]; blocks [T*K, numel]: the block of every (token, k) entry; weights [T, K]; ids [T, K]
        the entries' expert ids (layouts whose experts have biases index them by id; every provider passes them).
        -> weighted outputs [T, K, D] in x's dtype. No host sync (runs inside CUDA graphs)."""
        ...

    def run_expert(self, block: torch.Tensor, dispatch: Dispatch, u: int, out: torch.Tensor) -> None:
        """Large step: expert u of the dispatch, its block [numel], computed in place over its span of out [T*K, D]
        (the span's token rows on entry, their weighted outputs on return)."""
        ...

    def run_group(self, table: torch.Tensor, dispatch: Dispatch, units, slots, out: torch.Tensor) -> None:
        """Large step: experts `units` of the dispatch (indices into dispatch.experts), whose blocks are rows
        `slots` of table [R, numel], each computed in place over its span of out [T*K, D]. Layouts with a grouped
        kernel override this; the default runs run_expert one expert at a time."""
        for u, slot in zip(units, slots):
            self.run_expert(table[int(slot)], dispatch, int(u), out)

    def grouped_expert(self, device: torch.device):
        """This format as the grouped MoE GEMM reads it (engine.quant.grouped_gemm.GroupedExpert) where its kernels
        run on device, else None. Layouts with a grouped kernel override this."""
        return None

    def run_rows(self, x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor,
                 weights: torch.Tensor) -> torch.Tensor:
        """Small step where entry i of ids [T, K] uses table[rows[i]] ([R, numel] table). -> [T, D] combined."""
        return combine(self.run_gathered(x, table[rows], weights, ids), ids)

    def run_blocks(self, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
                   blocks: torch.Tensor) -> torch.Tensor:
        """Every routed expert's block is row `expert id` of blocks [E, numel] (resident and whole-layer copies).
        -> [T, D]. A large step on the grouped kernels is planned on the device (no host sync); otherwise the host
        plans it from the ids read back, and each expert runs from Python."""
        if is_small_step(ids.shape[0], ids.shape[1], self.expert_bytes):
            return self.run_rows(x, blocks, ids.reshape(-1), ids, weights)
        num_experts = blocks.shape[0]
        grouped = self.grouped_expert(x.device)
        if grouped is not None and grouped.fits(ids.numel(), num_experts):
            dispatch, out = start_layer_on_device(x, ids, weights, num_experts, grouped.tile_rows(ids.numel()))
            grouped.run_table(blocks, dispatch, out)
            return combine_grouped(out, dispatch, ids)
        dispatch, out = start_layer(x, ids.cpu().numpy(), weights, num_experts)
        self.run_group(blocks, dispatch, np.arange(dispatch.experts.size), dispatch.experts, out)
        return combine_grouped(out, dispatch, ids)
