"""The pager's slot state on the device, for decode steps that run as CUDA graphs (no host sync).

The host ExpertLRU of each layer stays the state's owner between graphed steps: `push` writes it to the
device before a run of graphed steps, `pull` reads it back before the host pager runs again (prefill,
a resize). Each layer owns the contiguous pool rows [base, base + capacity). Counters accumulate on the
device and are read in one copy."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.experts.pager import pager_kernels
from engine.experts.pager.pager_kernels import STAMP_STRIDE, next_pow2

# Warps of the one lru_step program per layer-step: the fastest at batch 1, hits only or a few misses
# (bench/lru_step_probe.py; bench/results/2026-11-29-lru-step-kernel/NOTES.md).
LRU_WARPS = 4


class DeviceLRU:
    def __init__(self, layers: list[int], num_experts: int, capacity: dict[int, int], base: dict[int, int],
                 device: torch.device):
        self.layers, self.num_experts, self.device = layers, num_experts, device
        self.capacity, self.base = dict(capacity), dict(base)
        self.position = {layer: p for p, layer in enumerate(layers)}
        # Rows padded to 16 slots: every layer's row keeps one alignment whatever the split (no recompiles).
        width = -(-max(1, max(capacity.values())) // 16) * 16
        count = len(layers)
        self.expert_slot = torch.full((count, num_experts), -1, dtype=torch.int32, device=device)
        self.slot_expert = torch.full((count, width), -1, dtype=torch.int32, device=device)
        self.last_use = torch.full((count, width), -1, dtype=torch.int64, device=device)
        self.clock = torch.ones(count, dtype=torch.int64, device=device)
        self.counts = torch.zeros(count, 3, dtype=torch.int64, device=device)  # hits, misses, evictions
        self.lru_step, self.copy_rows = pager_kernels.kernels(interpret=device.type != "cuda")
        self.lru_warps = LRU_WARPS
        self.pace = None  # engine.experts.pager.link_pace.LinkPace: miss copies paced to a slower link (benchmarks)

    @torch.inference_mode()
    def push(self, lrus: dict[int, ExpertLRU]) -> None:
        """Write the host LRUs to the device (oldest first gets the smallest stamp)."""
        count, width = self.slot_expert.shape
        expert_slot = np.full((count, self.num_experts), -1, dtype=np.int32)
        slot_expert = np.full((count, width), -1, dtype=np.int32)
        last_use = np.full((count, width), -1, dtype=np.int64)
        clock = np.ones(count, dtype=np.int64)
        for layer, lru in lrus.items():
            p = self.position[layer]
            for age, (expert, row) in enumerate(lru.slots.items()):
                slot = row - self.base[layer]
                expert_slot[p, expert], slot_expert[p, slot], last_use[p, slot] = slot, expert, age
            clock[p] = len(lru.slots) // STAMP_STRIDE + 1
        for tensor, value in ((self.expert_slot, expert_slot), (self.slot_expert, slot_expert),
                              (self.last_use, last_use), (self.clock, clock)):
            tensor.copy_(torch.from_numpy(value))

    @torch.inference_mode()
    def pull(self, lrus: dict[int, ExpertLRU]) -> dict[int, list[int]]:
        """Rebuild the host LRUs from the device state. -> each layer's free pool rows."""
        slot_expert, last_use = self.slot_expert.cpu().numpy(), self.last_use.cpu().numpy()
        free = {}
        for layer, lru in lrus.items():
            p, base, cap = self.position[layer], self.base[layer], self.capacity[layer]
            held = [s for s in range(cap) if slot_expert[p, s] >= 0]
            held.sort(key=lambda s: last_use[p, s])
            lru.slots = OrderedDict((int(slot_expert[p, s]), base + s) for s in held)
            free[layer] = [base + s for s in range(cap - 1, -1, -1) if slot_expert[p, s] < 0]
        return free

    @torch.inference_mode()
    def take_counts(self) -> np.ndarray:
        """-> [layers, 3] hits, misses, evictions since the last call (one device->host copy)."""
        counts = self.counts.cpu().numpy().copy()
        self.counts.zero_()
        return counts

    def step(self, layer: int, ids: torch.Tensor, forget: bool = False):
        """One layer-step on the device. ids [T, K] -> (pool row per entry [T*K], miss experts [T*K] (-1 past the
        last miss), their rows [T*K], the expert of each entry that got no slot [T*K] (-1 for the others), the
        entry indices [T*K]). No host sync: capturable in a CUDA graph. forget: no cache - every needed expert
        misses and lands in rows base .. base + misses (the static-UVA baseline)."""
        p, entries = self.position[layer], ids.numel()
        rows = torch.empty(5, entries, dtype=torch.int64, device=self.device)
        cap = entries if forget else self.capacity[layer]
        # The slot block spans every slot a layer can ever have (num_experts), not this split's: a re-split must
        # not compile a kernel (a compile takes seconds, inside the step that follows the re-split).
        widest = entries if forget else self.num_experts
        self.lru_step[(1,)](ids.reshape(-1), self.expert_slot[p], self.slot_expert[p], self.last_use[p],
                            self.clock[p:], self.counts[p], rows[0], rows[1], rows[2], rows[3], rows[4], entries,
                            self.num_experts, cap, self.base[layer], FORGET=forget, NB=max(16, next_pow2(entries)),
                            BE=max(16, next_pow2(self.num_experts)), BS=max(16, next_pow2(widest)),
                            STRIDE=STAMP_STRIDE, num_warps=self.lru_warps)
        return rows[0], rows[1], rows[2], rows[3], rows[4]

    def copy_misses(self, host_words: torch.Tensor, pool_words: torch.Tensor, miss_src: torch.Tensor,
                    miss_dst: torch.Tensor, chunk: int = 2048, split: int = 32) -> None:
        """Copy each listed expert (row of host_words [E, W]) into its pool row (pool_words [R, W])."""
        words = host_words.shape[1]
        split = max(1, min(split, -(-words // chunk)))
        if self.pace is not None:
            self.pace.begin()
        self.copy_rows[(miss_src.numel(), split)](host_words, pool_words, miss_src, miss_dst, words, CHUNK=chunk,
                                                  SPLIT=split, ITERS=-(-words // (chunk * split)), num_warps=4)
        if self.pace is not None:
            self.pace.after_rows(miss_src, words * host_words.element_size())
