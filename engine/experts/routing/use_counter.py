"""Counts routed (layer, unique expert) uses without a host sync on the hot path: the step's ids stay on the
device and are counted, all pending steps in one device->host copy, when someone reads the counters."""

from __future__ import annotations

import numpy as np
import torch

from engine.experts.counters import ExpertCounters


class LazyUseCounter:
    def __init__(self, counters: ExpertCounters):
        self.counters = counters
        self.pending: list[tuple[int, torch.Tensor, bool]] = []

    def record(self, layer: int, ids: torch.Tensor, is_hit: bool) -> None:
        self.pending.append((layer, ids, is_hit))

    def settle(self) -> ExpertCounters:
        if not self.pending:
            return self.counters
        flat = torch.cat([ids.reshape(-1) for _, ids, _ in self.pending]).cpu().numpy()
        offset = 0
        for layer, ids, is_hit in self.pending:
            used = np.unique(flat[offset : offset + ids.numel()]).size
            offset += ids.numel()
            self.counters.count(layer, used if is_hit else 0, 0 if is_hit else used)
        self.pending.clear()
        return self.counters
