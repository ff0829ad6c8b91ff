"""Counts routed (layer, unique expert) uses without a host sync on the hot path: the step's ids are kept
on the device and counted when someone reads the counters (after the step has synced anyway)."""

from __future__ import annotations

import torch

from engine.experts.provider import ExpertCounters


class LazyUseCounter:
    def __init__(self, counters: ExpertCounters):
        self.counters = counters
        self.pending: list[tuple[int, torch.Tensor, bool]] = []

    def record(self, layer: int, ids: torch.Tensor, is_hit: bool) -> None:
        self.pending.append((layer, ids, is_hit))

    def settle(self) -> ExpertCounters:
        for layer, ids, is_hit in self.pending:
            used = int(torch.unique(ids).numel())
            self.counters.count(layer, used if is_hit else 0, 0 if is_hit else used)
        self.pending.clear()
        return self.counters
