"""The layout of a store of quantized experts: one QuantExpertFormat per MoE layer, every layer's rows one size.

A file's types can differ by layer (llama.cpp's Q4_K_M gives ffn_down Q6_K in some layers, Q4_K in others), while
the store, the slot pool and the copy kernels move rows of one size: the largest layer's slot. Each layer's format
is padded to it, so a step's small/large decision and every miss copy are the same in every layer and provider."""

from __future__ import annotations

import torch

from engine.experts.formats.activation import SILU_GLU, ExpertBias
from engine.experts.formats.layout import ExpertLayout
from engine.quant.expert_format import QuantExpertFormat


class QuantLayout(ExpertLayout):
    """{layer: (gate, up, down) type names or ids} of [I, D], [I, D], [D, I] matrices -> per-layer formats, each
    with the experts' activation and its layer's biases ({layer: ExpertBias}, engine.experts.formats.activation)
    if any."""

    dtype = torch.uint8

    def __init__(self, hidden: int, intermediate: int, types_by_layer: dict[int, tuple], activation=SILU_GLU,
                 biases: dict[int, ExpertBias] | None = None):
        if not types_by_layer:
            raise ValueError("a quantized expert store needs at least one MoE layer")
        own = {layer: QuantExpertFormat(hidden, intermediate, *types) for layer, types in types_by_layer.items()}
        self.numel = max(f.slot_bytes for f in own.values())
        self.expert_bytes = self.numel  # uint8 rows
        self.hidden, self.intermediate = hidden, intermediate
        biases = biases or {}
        self.formats = {layer: QuantExpertFormat(hidden, intermediate, *f.types, slot_bytes=self.numel,
                                                 activation=activation, bias=biases.get(layer))
                        for layer, f in own.items()}

    def for_layer(self, layer: int) -> QuantExpertFormat:
        return self.formats[layer]

    def __repr__(self) -> str:
        kinds = sorted({"/".join(f.types) for f in self.formats.values()})
        return f"QuantLayout({len(self.formats)} layers: {', '.join(kinds)}; {self.numel} B per slot)"

    def _per_layer(self, *_args, **_kwargs):
        raise TypeError("a quantized store's blocks differ by layer: compute through layout.for_layer(layer)")

    run_gathered = run_expert = run_rows = run_blocks = run_group = _per_layer
