"""Experts stored one tensor each (blk.N.ffn_gate.E.weight: GGUF files written before llama.cpp stacked them,
such as many Mixtral downloads) seen as one stacked [E, bytes] view, when the file spaces them evenly."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.reader import GgufFile

SPLIT_NAMES = {"gate": "ffn_gate", "up": "ffn_up", "down": "ffn_down"}


def split_name(layer: int, projection: str, expert: int) -> str:
    return f"blk.{layer}.{SPLIT_NAMES[projection]}.{expert}.weight"


def has_split_experts(file: GgufFile, layer: int) -> bool:
    return split_name(layer, "gate", 0) in file.tensors


def split_expert_view(file: GgufFile, layer: int, projection: str, num_experts: int) -> tuple[int, np.ndarray]:
    """(quant type, uint8 [E, bytes per expert]) over the per-expert tensors, without copying: each row is one
    expert's contiguous blocks and rows are a constant stride apart (the tensors of other projections and
    alignment padding lie between them). Raises ModelFormatError / UnsupportedModelError otherwise."""
    names = [split_name(layer, projection, e) for e in range(num_experts)]
    missing = [name for name in names if name not in file.tensors]
    if missing:
        raise ModelFormatError(f"{file.path}: expert tensor '{missing[0]}' is missing")
    infos = [file.tensors[name] for name in names]
    if len({(info.qtype, info.shape, info.num_bytes) for info in infos}) != 1:
        raise UnsupportedModelError(f"{file.path}: the experts of blk.{layer}.{SPLIT_NAMES[projection]} differ in "
                                    "type or shape; run this file with --backend llama.cpp")
    offsets = [info.offset for info in infos]
    stride = offsets[1] - offsets[0] if num_experts > 1 else infos[0].num_bytes
    if stride < infos[0].num_bytes or any(b - a != stride for a, b in zip(offsets, offsets[1:])):
        raise UnsupportedModelError(f"{file.path}: the experts of blk.{layer}.{SPLIT_NAMES[projection]} are not "
                                    "evenly spaced in the file; run it with --backend llama.cpp")
    span = file.span(offsets[0], stride * (num_experts - 1) + infos[0].num_bytes)
    view = np.lib.stride_tricks.as_strided(span, shape=(num_experts, infos[0].num_bytes), strides=(stride, 1),
                                           writeable=False)
    return infos[0].qtype, view
