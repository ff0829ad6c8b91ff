"""Quantized experts of a GGUF file packed into an ExpertStore: one uint8 row per expert (its three matrices in
their stored blocks), in pinned host memory or on the device, read from the memory-mapped file a few experts at
a time. Rows the host tier leaves in the file are read from the mapping on a miss (GgufMappedRows)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from engine.alloc.host_tier import HostTier
from engine.errors import ModelFormatError
from engine.experts.formats.activation import SILU_GLU
from engine.experts.formats.store import ExpertStore
from engine.quant.layout import QuantLayout

EXPERTS_PER_COPY = 8  # rows read from the mapping per copy: bounded host memory beside the store


def quant_layout_of(experts: dict, activation=SILU_GLU, biases: dict | None = None) -> QuantLayout:
    """{layer: engine.gguf.tensors.ExpertLayer} -> the store layout, with the experts' activation and per-layer
    biases (engine.experts.formats.activation); refuses unsupported types and odd shapes."""
    first = next(iter(experts.values()))
    _, intermediate, hidden = first.gate.shape
    for layer, tensors in experts.items():
        expected = {"gate": (intermediate, hidden), "up": (intermediate, hidden), "down": (hidden, intermediate)}
        for name, shape in expected.items():
            tensor = getattr(tensors, name)
            if tuple(tensor.shape[1:]) != shape:
                raise ModelFormatError(f"{tensor.name}: expert shape {tuple(tensor.shape[1:])}, expected {shape} "
                                       f"as in layer {next(iter(experts))}")
    types = {layer: (t.gate.qtype, t.up.qtype, t.down.qtype) for layer, t in experts.items()}
    return QuantLayout(hidden, intermediate, types, activation, biases)


def num_experts_of(experts: dict) -> int:
    return next(iter(experts.values())).gate.shape[0]


def quant_store_from_gguf(experts: dict, device, pin: bool, progress=None, activation=SILU_GLU,
                          biases: dict | None = None, tier: HostTier | None = None) -> ExpertStore:
    """{layer: ExpertLayer} -> an ExpertStore of the experts' slot rows (pinned host rows when pin): every expert, or
    those the host tier holds, the others read from the mapping on a miss.
    progress(fraction, text) after each layer: reading the experts is most of a load."""
    layout = quant_layout_of(experts, activation, biases)
    store = ExpertStore(layout, list(experts), num_experts_of(experts), device, pin=pin, tier=tier)
    for done, (layer, tensors) in enumerate(experts.items()):
        fill_layer(store.blocks[layer], layout.for_layer(layer), tensors, store.held(layer))
        if progress:
            progress((done + 1) / len(experts), f"experts of layer {layer}")
    if not store.is_complete:
        store.mapped = GgufMappedRows(experts, layout)
    return store


def fill_layer(rows: torch.Tensor, fmt, tensors, held: tuple[int, ...]) -> None:
    """rows [len(held), slot_bytes] <- each held expert's gate, up and down blocks at the format's offsets; padding
    zeroed."""
    for start, end in fmt.padding():
        rows[:, start:end] = 0
    for spec, tensor in matrices(fmt, tensors):
        for first in range(0, len(held), EXPERTS_PER_COPY):
            chosen = list(held[first : first + EXPERTS_PER_COPY])
            source = torch.from_numpy(np.ascontiguousarray(tensor.raw[chosen]))  # reads the mapping
            rows[first : first + len(chosen), spec.byte_offset : spec.end].copy_(source)


def matrices(fmt, tensors) -> list[tuple]:
    """(spec, ExpertTensor) of gate, up and down, each checked against its spec's size."""
    pairs = [(fmt.gate, tensors.gate), (fmt.up, tensors.up), (fmt.down, tensors.down)]
    for spec, tensor in pairs:
        if tensor.raw.shape[1] != spec.nbytes:
            raise ModelFormatError(f"{tensor.name}: {tensor.raw.shape[1]} bytes per expert, a {spec.qtype.name} "
                                   f"[{spec.out_features}, {spec.in_features}] matrix is {spec.nbytes}")
    return pairs


class GgufMappedRows:
    """Expert rows read on demand from the GGUF file's mapping: the three matrices' blocks at the layer format's
    offsets, padding zeroed, so the row is byte for byte the one fill_layer would have held."""

    def __init__(self, experts: dict, layout):
        self.experts, self.layout = experts, layout

    def read(self, layer: int, expert: int, row: torch.Tensor) -> int:
        fmt = self.layout.for_layer(layer)
        for start, end in fmt.padding():
            row[start:end] = 0
        pairs = matrices(fmt, self.experts[layer])
        for spec, tensor in pairs:
            with warnings.catch_warnings():  # a read-only mapping: torch warns, and the copy below only reads it
                warnings.simplefilter("ignore", UserWarning)
                source = torch.from_numpy(tensor.raw[expert])
            row[spec.byte_offset : spec.end].copy_(source)
        return sum(spec.nbytes for spec, _ in pairs)
