"""Expert rows read on demand from a safetensors checkpoint (memory-mapped by safetensors): what the host tier
leaves in the file. Each row is packed by the layout exactly as the loader packs a held one (engine.model.loader),
so it holds the same bytes."""

from __future__ import annotations

from engine.quant.dense_layout import DenseLayout
from engine.model.args import ModelArgs
from engine.model.checkpoint import Checkpoint, is_stacked_transposed
from engine.model.weight_names import MoeWeightNames


class CheckpointRows:
    def __init__(self, ckpt: Checkpoint, names: MoeWeightNames, args: ModelArgs, layout: DenseLayout):
        self.ckpt, self.names, self.layout = ckpt, names, layout
        self.intermediate, self.hidden = args.moe_intermediate_size, args.expert_hidden_size

    def read(self, layer: int, expert: int, row) -> int:
        """row [numel] <- the expert's packed gate | up | down. -> bytes read from the file."""
        gate, up, down = self.matrices(layer, expert)
        self.layout.pack(row, gate, up, down)
        return sum(t.numel() * t.element_size() for t in (gate, up, down))

    def matrices(self, layer: int, expert: int):
        names, I, D = self.names, self.intermediate, self.hidden
        fused = names.fused_weight(layer, "gate_up_proj")
        if self.ckpt.has(fused):
            gate_up = self.ckpt.get_row(fused, expert)  # [2I, D], or [D, 2I] as published (is_stacked_transposed)
            down = self.ckpt.get_row(names.fused_weight(layer, "down_proj"), expert)
            if is_stacked_transposed(self.ckpt, fused, D, I):
                gate_up, down = gate_up.T, down.T
            return gate_up[:I], gate_up[I:], down
        return tuple(self.ckpt.get(names.expert_weight(layer, expert, part), shape)
                     for part, shape in ((names.gate, (I, D)), (names.up, (I, D)), (names.down, (D, I))))
