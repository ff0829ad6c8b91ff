"""Device expert slots. One allocation per slot, so the pool grows and shrinks without a second copy
and without ever holding old and new pools at once (the budget is a hard limit)."""

from __future__ import annotations

import torch


class SlotPool:
    def __init__(self, numel: int, dtype: torch.dtype, device: torch.device):
        self.numel, self.dtype, self.device = numel, dtype, device
        self.slots: list[torch.Tensor | None] = []
        self.free: list[int] = []

    @property
    def num_slots(self) -> int:
        return sum(slot is not None for slot in self.slots)

    @property
    def slot_bytes(self) -> int:
        return self.numel * torch.empty((), dtype=self.dtype).element_size()

    def grow(self, count: int) -> None:
        for _ in range(count):
            self.slots.append(torch.empty(self.numel, dtype=self.dtype, device=self.device))
            self.free.append(len(self.slots) - 1)

    def take(self) -> int | None:
        return self.free.pop() if self.free else None

    def give_back(self, slot: int) -> None:
        self.free.append(slot)

    def drop_free(self, count: int) -> int:
        """Release up to `count` unused slots' memory; returns how many were released."""
        dropped = 0
        while self.free and dropped < count:
            self.slots[self.free.pop()] = None
            dropped += 1
        return dropped
