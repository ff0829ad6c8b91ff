"""Dense expert blocks, one row per expert: [gate (I*D) | up (I*D) | down (D*I)] in the model's dtype."""

from __future__ import annotations

import torch

from engine.experts.formats import kernel
from engine.experts.formats.activation import SILU_GLU, ExpertBias
from engine.experts.routing.dispatch import Dispatch, combine
from engine.experts.formats.layout import ExpertLayout


class DenseLayout(ExpertLayout):
    """Views into a packed block: gate_up [2I, D] (transformers' fused layout) and down [D, I]. activation: what
    runs between the projections (engine.experts.formats.activation); biases: {MoE layer: ExpertBias} for models whose
    experts have them, reached through for_layer(layer)."""

    def __init__(self, hidden: int, intermediate: int, dtype: torch.dtype, activation=SILU_GLU,
                 biases: dict[int, ExpertBias] | None = None):
        self.hidden, self.intermediate, self.dtype = hidden, intermediate, dtype
        self.numel = 3 * hidden * intermediate
        self.expert_bytes = self.numel * torch.empty((), dtype=dtype).element_size()
        self.activation, self.bias = activation, None
        self.biases = biases or {}
        self.layers = {layer: self._with_bias(bias) for layer, bias in self.biases.items()}

    def _with_bias(self, bias: ExpertBias) -> "DenseLayout":
        layout = DenseLayout(self.hidden, self.intermediate, self.dtype, self.activation)
        layout.bias = bias
        return layout

    def for_layer(self, layer: int) -> "DenseLayout":
        return self.layers.get(layer, self)

    def _check_bound(self) -> None:
        if self.biases:
            raise TypeError("these experts have per-layer biases: compute through layout.for_layer(layer)")

    def gate_up(self, block: torch.Tensor) -> torch.Tensor:
        return block[: 2 * self.hidden * self.intermediate].view(2 * self.intermediate, self.hidden)

    def down(self, block: torch.Tensor) -> torch.Tensor:
        return block[2 * self.hidden * self.intermediate :].view(self.hidden, self.intermediate)

    def pack(self, block: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> None:
        n = self.hidden * self.intermediate
        block[:n].copy_(gate.reshape(-1))
        block[n : 2 * n].copy_(up.reshape(-1))
        block[2 * n :].copy_(down.reshape(-1))

    def run_gathered(self, x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor,
                     ids: torch.Tensor | None = None) -> torch.Tensor:
        """On the CPU one-row GEMMs per entry (kernel.entry_experts), elsewhere the batched GEMVs."""
        self._check_bound()
        if self.runs_entries(x):
            return kernel.entry_experts(x, blocks, weights, self.hidden, self.intermediate, self.activation,
                                        self.bias, ids)
        return kernel.gathered_experts(x, blocks, weights, self.hidden, self.intermediate, self.activation,
                                       self.bias, ids)

    def runs_entries(self, x: torch.Tensor) -> bool:
        """Small steps on the CPU run kernel.entry_experts where every row it reads (a token row, a block's
        projections, an activation row) starts 64 bytes after the one before: MKL's one-row GEMM rounds by its
        operands' alignment, so a block must compute alike in any row of any table, slot pool or buffer. Else the
        gathered path, which reads copies laid out alike in every mode."""
        size = x.element_size()
        return x.device.type == "cpu" and (self.hidden * size) % 64 == 0 and (self.intermediate * size) % 64 == 0

    def run_rows(self, x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor,
                 weights: torch.Tensor) -> torch.Tensor:
        """On the CPU each entry reads its row of the table in place (no gathered copy): the bits of
        run_gathered over the gathered rows."""
        if not self.runs_entries(x):
            return super().run_rows(x, table, rows, ids, weights)
        self._check_bound()
        blocks = [table[row] for row in rows.tolist()]
        return combine(kernel.entry_experts(x, blocks, weights, self.hidden, self.intermediate, self.activation,
                                            self.bias, ids), ids)

    def run_expert(self, block: torch.Tensor, dispatch: Dispatch, u: int, out: torch.Tensor) -> None:
        self._check_bound()
        kernel.run_expert(self.gate_up(block), self.down(block), dispatch, u, out, self.activation, self.bias)

    def run_group(self, table: torch.Tensor, dispatch: Dispatch, units, slots, out: torch.Tensor) -> None:
        """On CUDA the grouped GEMM (engine.quant.grouped_gemm, which reads dense blocks as BF16/F16/F32
        matrices): two launches for the whole group; elsewhere one expert at a time."""
        self._check_bound()
        from engine.quant.grouped_gemm import run_grouped, runs_grouped

        if not runs_grouped(out.device, self.activation, dispatch):
            return super().run_group(table, dispatch, units, slots, out)
        run_grouped(self.grouped_expert(out.device), table, dispatch, units, slots, out)

    def grouped_expert(self, device: torch.device):
        from engine.quant.grouped_gemm import GroupedExpert, runs_grouped

        self._check_bound()
        if not runs_grouped(device, self.activation):
            return None
        return GroupedExpert.dense(self.hidden, self.intermediate, self.dtype, self.activation, self.bias)
