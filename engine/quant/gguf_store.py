"""Quantized experts of a GGUF file packed into an ExpertStore: one uint8 row per expert (its three matrices in
their stored blocks), in pinned host memory or on the device, read from the memory-mapped file a few experts at
a time."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from engine.errors import ModelFormatError
from engine.experts.activation import SILU_GLU
from engine.experts.store import ExpertStore
from engine.quant.layout import QuantLayout

EXPERTS_PER_COPY = 8  # rows read from the mapping per copy: bounded host memory beside the store


def quant_layout_of(experts: dict, activation=SILU_GLU, biases: dict | None = None) -> QuantLayout:
    """{layer: engine.gguf.tensors.ExpertLayer} -> the store layout, with the experts' activation and per-layer
    biases (engine.experts.activation); refuses unsupported types and odd shapes."""
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


def quant_store_from_gguf(experts: dict, device, pin: bool, progress=None, activation=SILU_GLU,
                          biases: dict | None = None) -> ExpertStore:
    """{layer: ExpertLayer} -> an ExpertStore of every expert's slot row (pinned host rows when pin).
    progress(fraction, text) after each layer: reading the experts is most of a load."""
    layout = quant_layout_of(experts, activation, biases)
    num_experts = next(iter(experts.values())).gate.shape[0]
    store = ExpertStore(layout, list(experts), num_experts, device, pin=pin)
    for done, (layer, tensors) in enumerate(experts.items()):
        fill_layer(store.blocks[layer], layout.for_layer(layer), tensors)
        if progress:
            progress((done + 1) / len(experts), f"experts of layer {layer}")
    return store


def fill_layer(rows: torch.Tensor, fmt, tensors) -> None:
    """rows [E, slot_bytes] <- each expert's gate, up and down blocks at the format's offsets; padding zeroed."""
    for start, end in fmt.padding():
        rows[:, start:end] = 0
    for spec, tensor in ((fmt.gate, tensors.gate), (fmt.up, tensors.up), (fmt.down, tensors.down)):
        if tensor.raw.shape[1] != spec.nbytes:
            raise ModelFormatError(f"{tensor.name}: {tensor.raw.shape[1]} bytes per expert, a {spec.qtype.name} "
                                   f"[{spec.out_features}, {spec.in_features}] matrix is {spec.nbytes}")
        for first in range(0, rows.shape[0], EXPERTS_PER_COPY):
            chunk = np.ascontiguousarray(tensor.raw[first : first + EXPERTS_PER_COPY])  # reads the mapping
            with warnings.catch_warnings():  # a read-only mapping: torch warns, and the copy below only reads it
                warnings.simplefilter("ignore", UserWarning)
                source = torch.from_numpy(chunk)
            rows[first : first + len(chunk), spec.byte_offset : spec.end].copy_(source)
