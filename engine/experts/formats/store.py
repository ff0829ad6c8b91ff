"""Expert weights, one contiguous block per expert in the layout's format, all experts of all MoE layers: held in
memory (the device, or pinned host memory), or, past the host budget, partly left memory-mapped in the model file."""

from __future__ import annotations

import warnings
from typing import Protocol

import numpy as np
import psutil
import torch

from engine.alloc.host_tier import HostTier
from engine.errors import HostMemoryError
from engine.units import format_bytes
from engine.experts.formats.layout import ExpertLayout


class MappedRows(Protocol):
    """The model file's view of expert rows that are not held in memory."""

    def read(self, layer: int, expert: int, row: torch.Tensor) -> int:
        """Fill row [numel] with exactly the bytes the held row would hold (padding included). -> bytes read from
        the file (through the page cache)."""
        ...


class ExpertStore:
    """All experts of all MoE layers. blocks[layer] holds the layer's rows in memory, [held, numel]: every expert
    (row e = expert e) unless a HostTier leaves some in the file; then row_of maps an expert to its row (-1:
    mapped) and `mapped` reads the others.

    On the host, pinned memory lets a miss be one DMA copy at full link speed; if pinning fails the store
    falls back to pageable memory and says what that costs."""

    def __init__(self, layout: ExpertLayout, moe_layers: list[int], num_experts: int, device, pin: bool = False,
                 tier: HostTier | None = None):
        self.layout = layout
        self.num_experts = num_experts
        self.warning: str | None = None
        if tier is None and torch.device(device).type == "cpu":
            check_host_ram(len(moe_layers) * num_experts * layout.expert_bytes)
        self.tier = tier or HostTier(layout.expert_bytes, num_experts,
                                     {layer: tuple(range(num_experts)) for layer in moe_layers})
        self.is_pinned = pin
        self.mapped: MappedRows | None = None  # set by the loader when the tier leaves rows in the file
        self.row_of = {layer: held_index(self.tier.in_memory[layer], num_experts) for layer in moe_layers}
        self.blocks: dict[int, torch.Tensor] = {
            layer: self._allocate(len(self.tier.in_memory[layer]), layout.dtype, device) for layer in moe_layers}

    def _allocate(self, num_experts: int, dtype, device) -> torch.Tensor:
        if self.is_pinned and num_experts:
            try:
                return torch.empty(num_experts, self.layout.numel, dtype=dtype, device=device, pin_memory=True)
            except RuntimeError as err:
                self.is_pinned = False
                self.warning = (f"could not pin host memory for experts ({err}); using pageable memory, which "
                                "copies misses 3-5x slower")
                warnings.warn(self.warning, stacklevel=2)
        return torch.empty(num_experts, self.layout.numel, dtype=dtype, device=device)

    @property
    def is_complete(self) -> bool:
        """Every expert's row is in memory (whole-layer providers and graphed paging need that)."""
        return self.tier.is_complete

    def row(self, layer: int, expert: int) -> torch.Tensor | None:
        """The expert's row in memory, or None when it stays in the file (self.mapped reads it)."""
        index = int(self.row_of[layer][expert])
        return self.blocks[layer][index] if index >= 0 else None

    def held(self, layer: int) -> tuple[int, ...]:
        """The experts of the layer held in memory, in row order."""
        return self.tier.in_memory[layer]

    @property
    def expert_bytes(self) -> int:
        return self.layout.expert_bytes

    @property
    def total_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.blocks.values())


def held_index(held: tuple[int, ...], num_experts: int) -> np.ndarray:
    """expert -> its row among the held ones, -1 for the mapped ones."""
    index = np.full(num_experts, -1, dtype=np.int64)
    index[list(held)] = np.arange(len(held))
    return index


def check_host_ram(needed: int) -> None:
    available = psutil.virtual_memory().available
    if needed > available:
        raise HostMemoryError(
            f"the experts need {format_bytes(needed)} of host RAM but only {format_bytes(available)} is "
            "available; close other programs or use a smaller model"
        )
