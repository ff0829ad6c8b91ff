"""The pool rows of a pager whose every layer holds every one of its experts (a budget with a slot for each, once
they are all paged in). No step can miss or evict then, so a graphed layer-step's rows are a gather from a fixed
table: no LRU kernel and no copy launch (engine.experts.pager.device_pager). The device stamps no recency in such
steps; the routed ids the ring keeps are replayed into the host LRUs when the host takes the state back, so a later
shrink keeps the experts used last, as it would have."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.alloc.miss_curve import step_unique



def holds_every_expert(lrus: dict[int, ExpertLRU], num_experts: int) -> bool:
    return all(len(lru.slots) == num_experts for lru in lrus.values())


class HeldRows:
    def __init__(self, layers: list[int], num_experts: int, device: torch.device):
        self.position = {layer: p for p, layer in enumerate(layers)}
        self.table = torch.zeros(len(layers), num_experts, dtype=torch.int64, device=device)  # [layers, E] pool row
        # each layer's experts routed in held steps, least recently used first: what touching every step's ids
        # in order leaves behind, bounded by E per layer however long the session runs
        self.recent: dict[int, OrderedDict[int, None]] = {layer: OrderedDict() for layer in layers}

    def fill_from_lrus(self, lrus: dict[int, ExpertLRU]) -> None:
        """The table from the host LRUs (each holds every expert). Written in place: captured graphs read it."""
        table = np.zeros(tuple(self.table.shape), dtype=np.int64)
        for layer, lru in lrus.items():
            table[self.position[layer], list(lru.slots)] = list(lru.slots.values())
        self.table.copy_(torch.from_numpy(table))

    def fill_from_device(self, expert_slot: torch.Tensor, base: dict[int, int]) -> None:
        """The table from the device LRU's expert -> slot map [layers, E] (every entry >= 0) and each layer's base."""
        bases = torch.tensor([base[layer] for layer in self.position], dtype=torch.int64, device=self.table.device)
        torch.add(expert_slot.to(torch.int64), bases[:, None], out=self.table)

    def rows(self, layer: int, ids: torch.Tensor) -> torch.Tensor:
        """ids [T, K] -> the pool row of every entry [T*K] (one gather; capturable)."""
        return self.table[self.position[layer]][ids.reshape(-1)]

    def note(self, routed: list[tuple[int, np.ndarray]]) -> None:
        """Record held steps' routed ids (layer, ids [T, K]), in step order and first use within a step (the
        device LRU's stamps)."""
        for layer, ids in routed:
            recent = self.recent[layer]
            for expert in step_unique(ids):
                recent[int(expert)] = None
                recent.move_to_end(int(expert))

    def replay(self, lrus: dict[int, ExpertLRU]) -> None:
        """Touch the noted experts in the host LRUs in the order of their last use, then forget them."""
        for layer, recent in self.recent.items():
            lrus[layer].touch(recent)
            recent.clear()
