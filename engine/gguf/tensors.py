"""A GGUF tensor as Wisp's engine sees it: its quant type, torch-order shape and raw block bytes (a view of the
memory-mapped file), plus dequantization to a torch tensor through the gguf package's numpy reference."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.quant.types import SUPPORTED

# The quant types Wisp's engine computes with: stored as-is in host memory and device slots.
SUPPORTED_QTYPES = tuple(t.name for t in SUPPORTED)


def qtype_name(qtype: int) -> str:
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType(qtype).name


def row_bytes(qtype: int, row_length: int) -> int:
    """Bytes of one row of `row_length` elements (a whole number of blocks)."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(qtype)]
    return row_length // block * type_size


@dataclass(frozen=True)
class DenseTensor:
    """A non-expert weight. `shape` is the Wisp parameter's shape; `raw` holds its rows of blocks,
    uint8 [shape[0], bytes per row] (a 1-D tensor: one row per element); a view of the file unless llama.cpp
    reordered the rows (q/k of the llama architecture)."""

    name: str  # the GGUF tensor name
    qtype: int
    shape: tuple[int, ...]
    raw: np.ndarray

    @property
    def type_name(self) -> str:
        return qtype_name(self.qtype)

    def dequantize(self, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> torch.Tensor:
        """The weight as a dense torch tensor (a copy; the file stays untouched)."""
        return dequantize(self.raw, self.qtype, self.shape).to(device=device, dtype=dtype)


@dataclass(frozen=True)
class ExpertTensor:
    """One projection of every expert of a layer: `shape` [E, out, in] and `raw` uint8 [E, bytes per expert], a view
    of the file in which each expert's blocks are one contiguous row. Rows are adjacent when llama.cpp stacked
    the experts (ffn_*_exps) and a constant stride apart in older files that store one tensor per expert."""

    name: str
    qtype: int
    shape: tuple[int, int, int]
    raw: np.ndarray

    @property
    def type_name(self) -> str:
        return qtype_name(self.qtype)

    @property
    def bytes_per_expert(self) -> int:
        return self.raw.shape[1]

    def dequantize_expert(self, expert: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """One expert's [out, in] weight, dense (for references and tests; the engine keeps experts in blocks)."""
        return dequantize(self.raw[expert], self.qtype, self.shape[1:]).to(dtype)


@dataclass(frozen=True)
class ExpertLayer:
    """The routed experts of one MoE layer: gate and up [E, I, D], down [E, D, I]."""

    layer: int
    gate: ExpertTensor
    up: ExpertTensor
    down: ExpertTensor

    @property
    def bytes_per_expert(self) -> int:
        """One expert's three tensors, in their stored format."""
        return self.gate.bytes_per_expert + self.up.bytes_per_expert + self.down.bytes_per_expert


def dequantize(raw: np.ndarray, qtype: int, shape: tuple[int, ...]) -> torch.Tensor:
    """float32 [shape] of raw blocks, bit-exact with gguf.quants.dequantize."""
    from gguf.quants import dequantize as reference

    rows = raw.reshape(-1, row_bytes(qtype, shape[-1]) if shape else raw.size)
    values = np.array(reference(rows, qtype), dtype=np.float32, copy=True)  # a writable copy, never the mapping
    return torch.from_numpy(values.reshape(shape))
