"""The pool rows of a pager whose every layer holds every one of its experts (a budget with a slot for each, once
they are all paged in). No step can miss or evict then, so a graphed layer-step's rows are a gather from a fixed
table: no LRU kernel and no copy launch (engine.experts.pager.device_pager). The device stamps no recency in such
steps; the routed ids the ring keeps are replayed into the host LRUs when the host takes the state back, so a later
shrink keeps the experts used last, as it would have."""

from __future__ import annotations

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
        self.routed: list[tuple[int, np.ndarray]] = []  # (layer, ids [T, K]) of held steps, in step order

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
        self.routed += routed

    def replay(self, lrus: dict[int, ExpertLRU]) -> None:
        """Touch the noted steps' experts in the host LRUs, in step order and first use within a step (the device
        LRU's stamps), then forget them."""
        for layer, ids in self.routed:
            lrus[layer].touch(int(e) for e in step_unique(ids))
        self.routed.clear()
