"""The WiSP expert pager: a pool of device slots holding each layer's recently used experts.

Per layer-step: read the routed ids on the host (one sync) -> hits and misses -> place misses in free
slots or evict the layer's least recently used experts not needed now -> copy only the misses (a side
stream on CUDA, overlapped with gathering the hits) -> compute. A step needing more experts than the
layer's capacity fetches them in groups that fit. Results are bitwise those of resident mode."""

from __future__ import annotations

import numpy as np
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.alloc.miss_curve import step_unique
from engine.experts.copy_engine import CopyEngine
from engine.experts.kernel import combine, gathered_experts, is_small_step, run_expert
from engine.experts.provider import ExpertCounters, start_layer
from engine.experts.slot_pool import SlotPool
from engine.experts.store import ExpertStore


class PagedExperts:
    name = "paged"

    def __init__(self, host: ExpertStore, device: torch.device, capacity: dict[int, int], predictor=None):
        self.host, self.layout, self.device = host, host.layout, device
        self.counters = ExpertCounters()
        self.pool = SlotPool(self.layout.numel, next(iter(host.blocks.values())).dtype, device)
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
        """Change slots per layer (between steps), keeping each layer's most recently used experts that fit."""
        kept = {}
        for layer, lru in self.lru.items():
            lru.shrink_to(min(capacity[layer], self.host.num_experts))
            kept[layer] = list(lru.slots)  # oldest first
            lru.slots.clear()
        self.copies.synchronize()
        self.pool.reallocate(sum(lru.capacity for lru in self.lru.values()))
        for layer, experts in kept.items():
            self._load(layer, experts, keep=set())
        self.copies.synchronize()

    def warm(self, experts: dict[int, list[int]]) -> None:
        """Page in the given experts of each layer (up to its capacity) before serving, e.g. from a trace."""
        for layer, wanted in experts.items():
            self._load(layer, [e for e in wanted if e not in self.lru[layer]][: self.lru[layer].capacity], keep=set())
        self.copies.synchronize()


    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        ids_host = ids.cpu().numpy()  # the one host sync of this layer-step
        needed = [int(e) for e in step_unique(ids_host)]
        if self.routing_listener is not None:
            self.routing_listener(layer, needed, not self.step_is_prefill)
        hits, misses = self.lru[layer].split(needed)
        self.counters.count(layer, len(hits), len(misses))
        self.copies.wait_prefetch(layer)
        self.counters.prefetch_used += self.copies.take_prefetched(layer, hits)
        if is_small_step(ids.shape[0], ids.shape[1], self.host.expert_bytes):
            out = self._gathered(layer, x, ids, ids_host, weights, hits, misses, set(needed))
        else:
            out = self._per_expert(layer, x, ids, ids_host, weights, hits, misses, set(needed))
        self.lru[layer].touch(needed)
        if self.predictor is not None:
            self._prefetch(layer, needed)
        return combine(out, ids)

    def _gathered(self, layer, x, ids, ids_host, weights, hits, misses, pending) -> torch.Tensor:
        """Small step: gather every entry's expert block into one buffer, then two batched GEMVs."""
        flat = ids_host.reshape(-1)
        group = self._load(layer, misses, keep=pending)
        if len(group) == len(misses):
            self.copies.wait()
            blocks = self.pool.tensor.index_select(0, self._slots(layer, flat))
        else:
            blocks = torch.empty(flat.size, self.layout.numel, dtype=self.pool.dtype, device=self.device)
            self._fill(layer, blocks, flat, hits, pending)
            while misses:
                group = group or self._load(layer, misses, keep=pending)
                self.copies.wait()
                self._fill(layer, blocks, flat, group, pending)
                misses, group = misses[len(group):], []
        return gathered_experts(x, blocks, weights, self.layout.hidden, self.layout.intermediate)

    def _slots(self, layer: int, experts: np.ndarray) -> torch.Tensor:
        lru = self.lru[layer]
        return torch.tensor([lru.slot_of(int(e)) for e in experts], dtype=torch.long).to(self.device)

    def _fill(self, layer, blocks, flat: np.ndarray, experts: list[int], pending: set[int]) -> None:
        """Copy the slots of `experts` into the rows of `blocks` whose entry routes to them."""
        if not experts:
            return
        rows = np.nonzero(np.isin(flat, experts))[0]
        rows_device = torch.from_numpy(rows).to(self.device)
        blocks.index_copy_(0, rows_device, self.pool.tensor.index_select(0, self._slots(layer, flat[rows])))
        pending.difference_update(experts)

    def _per_expert(self, layer, x, ids, ids_host, weights, hits, misses, pending) -> torch.Tensor:
        """Large step (prefill): each expert multiplies its own tokens; misses come in groups that fit."""
        dispatch, out = start_layer(x, ids, ids_host)
        index = {int(e): u for u, e in enumerate(dispatch.experts)}
        group = self._load(layer, misses, keep=pending)  # copies overlap with computing the hits
        self._compute(layer, hits, index, x, weights, dispatch, out, pending)
        while misses:
            group = group or self._load(layer, misses, keep=pending)
            if not group:
                raise RuntimeError(f"layer {layer} has no expert slot to page into")
            self.copies.wait()
            self._compute(layer, group, index, x, weights, dispatch, out, pending)
            misses, group = misses[len(group):], []
        return out

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
            self.copies.copy([(self.pool.tensor[lru.slot_of(e)], self.host.blocks[layer][e]) for e in loaded])
        return loaded

    def _compute(self, layer, experts, index, x, weights, dispatch, out, pending: set[int]) -> None:
        lru = self.lru[layer]
        for expert in experts:
            slot = self.pool.tensor[lru.slot_of(expert)]
            run_expert(x, self.layout.gate_up(slot), self.layout.down(slot), weights, dispatch, index[expert], out)
            pending.discard(expert)

    def _prefetch(self, layer: int, needed: list[int]) -> None:
        position = self.moe_layers.index(layer)
        self.predictor.observe(layer, needed)
        if position + 1 >= len(self.moe_layers):
            return
        following = self.moe_layers[position + 1]
        guesses = [e for e in self.predictor.predict(layer, needed, following) if e not in self.lru[following]]
        loaded = self._load(following, guesses, keep=set())
        if loaded:
            self.copies.mark_prefetch(following, loaded)
            self.counters.prefetched += len(loaded)
