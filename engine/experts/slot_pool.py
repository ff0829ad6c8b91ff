"""Device expert slots: one contiguous [num_slots, numel] tensor, so a step can gather any set of slots
in one kernel. Resizing frees the old pool before allocating the new one (the budget is a hard limit);
the experts kept across a resize are copied back from the pinned host master, not device to device."""

from __future__ import annotations

import torch


class SlotPool:
    def __init__(self, numel: int, dtype: torch.dtype, device: torch.device):
        self.numel, self.dtype, self.device = numel, dtype, device
        self.tensor = torch.empty(0, numel, dtype=dtype, device=device)
        self.free: list[int] = []

    @property
    def num_slots(self) -> int:
        return self.tensor.shape[0]

    @property
    def slot_bytes(self) -> int:
        return self.numel * self.tensor.element_size()

    def reallocate(self, num_slots: int) -> None:
        """A new, empty pool of num_slots (the old contents are dropped first)."""
        self.tensor = torch.empty(0, self.numel, dtype=self.dtype, device=self.device)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
        self.tensor = torch.empty(num_slots, self.numel, dtype=self.dtype, device=self.device)
        self.free = list(range(num_slots - 1, -1, -1))

    def take(self) -> int | None:
        return self.free.pop() if self.free else None
