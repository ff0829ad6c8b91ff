"""The WiSP expert pager: a pool of device slots holding each layer's recently used experts.

Per layer-step: read the routed ids on the host (one sync) -> hits and misses -> place misses in free
slots or evict the layer's least recently used experts not needed now -> copy only the misses (a side
stream on CUDA, overlapped with computing the hits) -> compute. A step needing more experts than the
layer's capacity runs in expert groups that fit. Results are bitwise those of resident mode."""

from __future__ import annotations

import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.alloc.miss_curve import step_unique
from engine.experts.copy_engine import CopyEngine
from engine.experts.kernel import Dispatch, combine, run_expert
from engine.experts.provider import ExpertCounters, start_layer
from engine.experts.slot_pool import SlotPool
from engine.experts.store import ExpertStore


class PagedExperts:
    name = "paged"

    def __init__(self, host: ExpertStore, device: torch.device, capacity: dict[int, int], predictor=None):
        self.host, self.layout = host, host.layout
        self.counters = ExpertCounters()
        dtype = next(iter(host.blocks.values())).dtype
        self.pool = SlotPool(self.layout.numel, dtype, device)
        self.lru = {layer: ExpertLRU(0) for layer in host.blocks}
        self.copies = CopyEngine(device, self.counters)
        self.predictor = predictor
        self.routing_listener = None  # (layer, needed experts, is_decode) -> None; the online controller
        self.step_is_prefill = False  # set by the model runner before each forward
        self.moe_layers = list(host.blocks)
        self.set_capacity(capacity)

    @property
    def capacity(self) -> dict[int, int]:
        return {layer: lru.capacity for layer, lru in self.lru.items()}

    def set_capacity(self, capacity: dict[int, int]) -> None:
        """Change slots per layer (between steps). Shrinking frees device memory before growing takes any."""
        for layer, lru in self.lru.items():
            new = min(capacity[layer], self.host.num_experts)
            if new < lru.capacity:
                for slot in lru.shrink_to(new):
                    self.pool.give_back(slot)
            lru.capacity = new
        needed = sum(lru.capacity for lru in self.lru.values())
        surplus = self.pool.num_slots - needed
        if surplus > 0:
            self.pool.drop_free(surplus)
        elif surplus < 0:
            self.pool.grow(-surplus)

    def warm(self, experts: dict[int, list[int]]) -> None:
        """Page in the given experts of each layer (up to its capacity) before serving, e.g. from a trace."""
        for layer, wanted in experts.items():
            self._load(layer, [e for e in wanted if e not in self.lru[layer]][: self.lru[layer].capacity], keep=set())
        self.copies.synchronize()

    @property
    def device_bytes(self) -> int:
        return self.pool.num_slots * self.pool.slot_bytes

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        ids_host = ids.cpu().numpy()  # the one host sync of this layer-step
        dispatch, out = start_layer(x, ids, ids_host)
        needed = [int(e) for e in step_unique(ids_host)]
        if self.routing_listener is not None:
            self.routing_listener(layer, needed, not self.step_is_prefill)
        lru = self.lru[layer]
        hits, misses = lru.split(needed)
        self.counters.count(layer, len(hits), len(misses))
        self.copies.wait_prefetch(layer)
        self.counters.prefetch_used += self.copies.take_prefetched(layer, hits)
        index = {int(e): u for u, e in enumerate(dispatch.experts)}
        pending = set(needed)
        group = self._load(layer, misses, keep=pending)  # copies overlap with computing the hits
        self._compute(layer, hits, index, x, weights, dispatch, out, pending)
        while misses:
            group = group or self._load(layer, misses, keep=pending)
            if not group:
                raise RuntimeError(f"layer {layer} has no expert slot to page into")
            self.copies.wait()
            self._compute(layer, group, index, x, weights, dispatch, out, pending)
            misses, group = misses[len(group):], []
        lru.touch(needed)
        if self.predictor is not None:
            self._prefetch(layer, needed)
        return combine(out, ids)

    def _load(self, layer: int, misses: list[int], keep: set[int]) -> list[int]:
        """Place and start copying as many misses as fit now; returns the experts being copied."""
        lru, loaded, keep = self.lru[layer], [], set(keep)
        for expert in misses:
            placement = lru.place(expert, keep, self.pool.take)
            if placement is None:
                break
            self.counters.evictions += placement.evicted is not None
            loaded.append(expert)
            keep.add(expert)  # never evict what this call just placed
        if loaded:
            self.copies.copy([(self.pool.slots[lru.slot_of(e)], self.host.blocks[layer][e]) for e in loaded])
        return loaded

    def _compute(self, layer, experts, index, x, weights, dispatch: Dispatch, out, pending: set[int]) -> None:
        lru = self.lru[layer]
        for expert in experts:
            slot = self.pool.slots[lru.slot_of(expert)]
            run_expert(x, self.layout.gate_up(slot), self.layout.down(slot), weights, dispatch, index[expert], out)
            pending.discard(expert)

    def _prefetch(self, layer: int, needed: list[int]) -> None:
        position = self.moe_layers.index(layer)
        self.predictor.observe(layer, needed)
        if position + 1 >= len(self.moe_layers):
            return
        following = self.moe_layers[position + 1]
        lru = self.lru[following]
        guesses = [e for e in self.predictor.predict(layer, needed, following) if e not in lru]
        loaded = self._load(following, guesses, keep=set())
        if loaded:
            self.copies.mark_prefetch(following, loaded)
            self.counters.prefetched += len(loaded)
