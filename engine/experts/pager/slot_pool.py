"""Device expert slots: one contiguous [num_slots, numel] tensor, so a step can gather any set of slots
in one kernel. Each MoE layer owns the rows [base, base + capacity). Resizing frees the old pool before
allocating the new one (the budget is a hard limit); the experts kept across a resize are copied back
from the pinned host master, not device to device."""

from __future__ import annotations

import torch


class SlotPool:
    def __init__(self, numel: int, dtype: torch.dtype, device: torch.device):
        self.numel, self.dtype, self.device = numel, dtype, device
        self.tensor = torch.empty(0, numel, dtype=dtype, device=device)
        self.base: dict[int, int] = {}
        self.free: dict[int, list[int]] = {}

    @property
    def num_slots(self) -> int:
        return self.tensor.shape[0]

    @property
    def slot_bytes(self) -> int:
        return self.numel * self.tensor.element_size()

    def reallocate(self, capacity: dict[int, int]) -> None:
        """A new, empty pool with capacity[layer] rows per layer (the old contents are dropped first)."""
        self.tensor = torch.empty(0, self.numel, dtype=self.dtype, device=self.device)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        self.tensor = torch.empty(sum(capacity.values()), self.numel, dtype=self.dtype, device=self.device)
        row = 0
        for layer, count in capacity.items():
            self.base[layer], self.free[layer] = row, list(range(row + count - 1, row - 1, -1))
            row += count

    def take(self, layer: int) -> int | None:
        free = self.free[layer]
        return free.pop() if free else None
