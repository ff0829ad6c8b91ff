"""The slot format of a quantized expert: its three matrices in their file's block types, one contiguous uint8 row
(a miss is one copy), and the two compute paths of an ExpertLayout (engine.experts.formats.layout).

Slot row: [gate (I x D) | up (I x D) | down (D x I)], each matrix at a 16-byte-aligned offset and the row padded to
a multiple of 16 bytes (the pager's copy kernels move 4- and 16-byte words), or to the store's row size when the
layers' formats differ (engine.quant.layout). Q4_K_M files mix types (Q4_K gate and up, Q6_K down in some layers),
so each matrix has its own type; gate and up of one type with nothing between them are one [2I, D] matrix and run
as one GEMV. The activation between the projections and the optional per-expert biases are
engine.experts.formats.activation's, as in the dense format: SwiGLU without biases runs fused into the down GEMV's
input, any other activation (gpt-oss's clamped SwiGLU) and the biases run as elementwise torch ops between the GEMVs,
which keeps every entry's result independent of the others."""

from __future__ import annotations

import numpy as np
import torch

from engine.experts.formats.activation import SILU_GLU, ExpertBias
from engine.experts.routing.dispatch import Dispatch, combine
from engine.experts.formats.kernel import run_expert
from engine.experts.formats.layout import ExpertLayout
from engine.quant.grouped_gemm import GroupedExpert, run_grouped, runs_grouped
from engine.quant.linear import (QuantLinearSpec, dequantize, gathered_gemv, gathered_swiglu, runs_words,
                                 scaled_gemv)
from engine.quant.types import SLOT_ALIGN, align, quant_type

ALIGN = SLOT_ALIGN


class QuantExpertFormat(ExpertLayout):
    """One expert of hidden size D and intermediate size I, its matrices of the given types (names or ids);
    slot_bytes: the row size when it must exceed this format's own (a store whose layers differ); activation and
    bias: what runs between and after the projections (engine.experts.formats.activation; bias rows by expert id)."""

    dtype = torch.uint8  # a slot is bytes

    def __init__(self, hidden: int, intermediate: int, gate_type, up_type, down_type, slot_bytes: int = 0,
                 activation=SILU_GLU, bias: ExpertBias | None = None):
        self.hidden, self.intermediate = hidden, intermediate
        self.activation, self.bias = activation, bias
        self.gate = QuantLinearSpec(quant_type(gate_type), intermediate, hidden, 0)
        self.up = QuantLinearSpec(quant_type(up_type), intermediate, hidden, align(self.gate.end))
        self.down = QuantLinearSpec(quant_type(down_type), hidden, intermediate, align(self.up.end))
        self.slot_bytes = max(align(self.down.end), slot_bytes)
        self.expert_bytes = self.slot_bytes  # what a miss copies
        if self.slot_bytes % ALIGN:
            raise ValueError(f"slot rows must be a multiple of {ALIGN} bytes, got {slot_bytes}")
        fused = self.gate.qtype == self.up.qtype and self.up.byte_offset == self.gate.end
        self.gate_up = QuantLinearSpec(self.gate.qtype, 2 * intermediate, hidden, 0) if fused else None

    @property
    def numel(self) -> int:
        """Elements of a slot row (bytes: its dtype is uint8)."""
        return self.slot_bytes

    @property
    def types(self) -> tuple[str, str, str]:
        return self.gate.qtype.name, self.up.qtype.name, self.down.qtype.name

    def __repr__(self) -> str:
        return f"QuantExpertFormat({self.hidden}, {self.intermediate}, {'/'.join(self.types)}, {self.slot_bytes} B)"

    def padding(self) -> list[tuple[int, int]]:
        """The byte ranges of a row no matrix uses."""
        edges = [(self.gate.end, self.up.byte_offset), (self.up.end, self.down.byte_offset),
                 (self.down.end, self.slot_bytes)]
        return [(start, end) for start, end in edges if end > start]

    def pack(self, gate, up, down) -> torch.Tensor:
        """The file's raw bytes of one expert's three matrices (uint8 arrays or tensors) -> its slot row."""
        row = torch.zeros(self.slot_bytes, dtype=torch.uint8)
        self.pack_into(row, gate, up, down)
        return row

    def pack_into(self, row: torch.Tensor, gate, up, down) -> None:
        """Write one expert into a slot row in place (a row of a pinned store, say); padding bytes are zeroed."""
        for start, end in self.padding():
            row[start:end] = 0
        for spec, raw in ((self.gate, gate), (self.up, up), (self.down, down)):
            data = raw if torch.is_tensor(raw) else torch.from_numpy(np.array(raw, dtype=np.uint8, copy=True))
            if data.numel() != spec.nbytes:
                raise ValueError(f"a {spec.qtype.name} [{spec.out_features}, {spec.in_features}] matrix is "
                                 f"{spec.nbytes} bytes, got {data.numel()}")
            row[spec.byte_offset : spec.end].copy_(data.reshape(-1))

    def gathered(self, x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, weights: torch.Tensor,
                 ids: torch.Tensor | None = None):
        """Small step: entry i = (t, k) of weights [T, K] uses slot table[rows[i]], ids [T, K] its expert (read
        for the bias rows) -> weighted outputs [T, K, D]. Two fused dequantize + GEMV launches: SwiGLU without biases,
        where gate_up runs the word GEMV (linear.runs_words), as gate_up with silu(gate) * up in its epilogue, then
        down with the routing weight in its (or scaled after); otherwise gate_up, then down with silu(gate) * up on
        its input, or the activation's output."""
        T, K = weights.shape
        if (self.gate_up is not None and self.activation is SILU_GLU and self.bias is None
                and runs_words(x.device, self.gate_up)):
            h = gathered_swiglu(x, table, rows, self.gate_up, x_div=K)  # [T*K, I]
            return scaled_gemv(h, table, rows, self.down, weights.reshape(-1)).view(T, K, self.hidden)
        if self.gate_up is not None:
            gate_up = gathered_gemv(x, table, rows, self.gate_up, x_div=K)  # [T*K, 2I]
        else:
            gate_up = torch.cat([gathered_gemv(x, table, rows, spec, x_div=K) for spec in (self.gate, self.up)], -1)
        if self.activation is SILU_GLU and self.bias is None:
            y = gathered_gemv(gate_up, table, rows, self.down, glu=True)  # [T*K, D]
        else:
            y = self._down_of(gate_up, table, rows, ids)
        return (y * weights.reshape(-1, 1)).to(x.dtype).view(T, K, self.hidden)

    def _down_of(self, gate_up: torch.Tensor, table, rows, ids) -> torch.Tensor:
        """gate_up [T*K, 2I] -> down(activation(gate_up + bias)) + bias [T*K, D], as kernel.gathered_experts."""
        if self.bias is not None:
            if ids is None:
                raise TypeError("experts with biases need each entry's expert id")
            gate_up = gate_up + self.bias.gate_up[ids.reshape(-1)]
        y = gathered_gemv(self.activation(gate_up), table, rows, self.down)  # [T*K, D]
        return y if self.bias is None else y + self.bias.down[ids.reshape(-1)]

    def run_gathered(self, x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor,
                     ids: torch.Tensor | None = None) -> torch.Tensor:
        """blocks [T*K, slot_bytes]: the slot of every (token, k) entry, ids [T, K] their experts
        -> weighted outputs [T, K, D]."""
        return self.gathered(x, blocks, torch.arange(blocks.shape[0], device=blocks.device), weights, ids)

    def run_rows(self, x, table, rows, ids, weights) -> torch.Tensor:
        """Small step: entry i of ids [T, K] uses slot table[rows[i]] (read in place, no gathered copy)
        -> [T, D], combined in expert-id order."""
        return combine(self.gathered(x, table, rows, weights, ids), ids)

    def weights(self, slot: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """A slot row -> (gate_up [2I, D], down [D, I]) dequantized to dtype."""
        if self.gate_up is not None:
            gate_up = dequantize(slot, self.gate_up, dtype)
        else:
            gate_up = torch.cat([dequantize(slot, self.gate, dtype), dequantize(slot, self.up, dtype)])
        return gate_up, dequantize(slot, self.down, dtype)

    def run_expert(self, block: torch.Tensor, dispatch: Dispatch, u: int, out: torch.Tensor) -> None:
        """Large step: expert u of the dispatch from its slot row, dequantized to out's dtype, then
        engine.experts.formats.kernel.run_expert's math in place in its span of out [T*K, D]."""
        gate_up, down = self.weights(block, out.dtype)
        run_expert(gate_up, down, dispatch, u, out, self.activation, self.bias)

    def run_group(self, table: torch.Tensor, dispatch: Dispatch, units, slots, out: torch.Tensor) -> None:
        """Large step, a group of experts: on CUDA the grouped GEMM (engine.quant.grouped_gemm), dequantizing each
        weight tile as it multiplies (two launches for the group); elsewhere run_expert one expert at a time."""
        if not runs_grouped(out.device, self.activation, dispatch):
            return super().run_group(table, dispatch, units, slots, out)
        run_grouped(self.grouped, table, dispatch, units, slots, out)

    def grouped_expert(self, device: torch.device) -> GroupedExpert | None:
        return self.grouped if runs_grouped(device, self.activation) else None

    @property
    def grouped(self) -> GroupedExpert:
        """This format's matrices as the grouped kernels read them."""
        return GroupedExpert(self.gate, self.up, self.down, self.slot_bytes, self.activation, self.bias)
