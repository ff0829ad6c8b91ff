"""Copies of expert rows to the device whichever tier holds them: a held row is copied as it is; a row left in the
model file is first read from the mapping (the page cache) into a pinned staging row, then copied the same way.
The bytes reaching the slot are the same either way, so outputs do not depend on the host budget."""

from __future__ import annotations

import time

import torch

from engine.experts.pager.copy_engine import CopyEngine
from engine.experts.counters import ExpertCounters
from engine.experts.formats.store import ExpertStore


class StagingRows:
    """A ring of staging rows. A row is reused only once the copy that read it has finished."""

    def __init__(self, num_rows: int, numel: int, dtype: torch.dtype, pin: bool):
        self.rows = torch.empty(num_rows, numel, dtype=dtype, pin_memory=pin) if num_rows else None
        self.done: list[object | None] = [None] * num_rows  # the event after the copy that last read each row
        self.next = 0
        self.num_taken = 0  # rows taken since the last copy was started

    @property
    def is_exhausted(self) -> bool:
        """Every row holds a read whose copy has not been started yet."""
        return self.num_taken == len(self.done)

    def take(self) -> int:
        index = self.next
        if self.done[index] is not None:
            self.done[index].synchronize()
            self.done[index] = None
        self.next, self.num_taken = (index + 1) % len(self.done), self.num_taken + 1
        return index

    def started(self, event, taken: list[int]) -> None:
        """The copies reading `taken` were started; `event` (None on the CPU: already done) marks their end."""
        for index in taken:
            self.done[index] = event
        self.num_taken = 0


class RowCopier:
    """Start copies of (slot, layer, expert) for the pager, reading mapped rows through staging."""

    def __init__(self, store: ExpertStore, copies: CopyEngine, counters: ExpertCounters, device: torch.device):
        self.store, self.copies, self.counters = store, copies, counters
        pin = device.type == "cuda" and store.is_pinned
        self.staging = StagingRows(store.tier.staging_rows if store.mapped else 0, store.layout.numel,
                                   store.layout.dtype, pin)

    def copy(self, targets: list[tuple[torch.Tensor, int, int]], after=None) -> None:
        """Start copying each (device slot, layer, expert); copies.wait() before using the slots. after: see
        CopyEngine.copy."""
        pairs, taken = [], []
        for slot, layer, expert in targets:
            row = self.store.row(layer, expert)
            if row is None:
                if self.staging.is_exhausted:
                    self._start(pairs, taken, after)
                    pairs, taken = [], []
                taken.append(self.staging.take())
                row = self.staging.rows[taken[-1]]
                self._read(layer, expert, row)
            pairs.append((slot, row))
        self._start(pairs, taken, after)

    def _start(self, pairs, taken: list[int], after=None) -> None:
        if pairs:
            self.copies.copy(pairs, after)
        if taken:
            self.staging.started(self.copies.last_event if self.copies.stream is not None else None, taken)

    def _read(self, layer: int, expert: int, row: torch.Tensor) -> None:
        start = time.perf_counter()
        num_bytes = self.store.mapped.read(layer, expert, row)
        self.counters.page_cache_s += time.perf_counter() - start
        self.counters.page_cache_reads += 1
        self.counters.page_cache_bytes += num_bytes
