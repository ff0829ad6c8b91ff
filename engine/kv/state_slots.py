"""Block bookkeeping for hybrid linear-attention models (torch-free): paged KV blocks for the full-attention
layers, plus one state slot per running sequence for the linear-attention layers' fixed-size state.

A sequence holds its state slot exactly as long as its KV blocks: preemption (by recompute) frees both and the
sequence's next prefill rebuilds its state from its tokens, so no state is ever lost or shared. There is no prefix
cache: a cached KV prefix would skip tokens whose linear-attention state was never kept."""

from __future__ import annotations

from collections import deque
from typing import Protocol

from engine.kv.block_manager import BlockManager, PagedSequence


class StatefulSequence(PagedSequence, Protocol):
    state_slot: int


class HybridBlockManager(BlockManager):
    def __init__(self, num_blocks: int, block_size: int, num_state_slots: int):
        super().__init__(num_blocks, block_size)
        self.num_state_slots = num_state_slots
        self.free_state_slots: deque[int] = deque(range(num_state_slots))

    def _cached_prefix(self, token_ids: list[int]) -> list[int]:
        return []

    def can_allocate(self, seq: StatefulSequence) -> bool:
        return bool(self.free_state_slots) and super().can_allocate(seq)

    def allocate(self, seq: StatefulSequence, num_written: int | None = None) -> None:
        super().allocate(seq, num_written)
        seq.state_slot = self.free_state_slots.popleft()

    def deallocate(self, seq: StatefulSequence) -> None:
        if seq.state_slot >= 0:
            self.free_state_slots.append(seq.state_slot)
            seq.state_slot = -1
        super().deallocate(seq)
