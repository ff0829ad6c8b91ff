"""The WiSP expert pager: a pool of device slots holding each layer's recently used experts.

Per layer-step: read the routed ids on the host (one sync) -> hits and misses -> place misses in free
slots or evict the layer's least recently used experts not needed now -> copy only the misses (a side
stream on CUDA, overlapped with gathering the hits) -> compute. A step needing more experts than the
layer's capacity: a prefill fetches them in groups that fit; a decode step copies the misses that find no
free or evictable slot straight into its gathered buffer, uncached (so batched decode at a small budget
still runs as whole-step CUDA graphs). Results are bitwise those of resident mode.

Decode steps on CUDA can run the same rule on the device instead (engine.experts.device_lru): the step's
bookkeeping and miss copies are kernels, so the whole step runs as CUDA graphs with no host sync
(engine.runtime.decode_graphs). The host LRUs and the device state hand over ownership at the switch (a
prefill, a resize, a counter read)."""

from __future__ import annotations

import numpy as np
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.alloc.miss_curve import step_unique
from engine.experts import pager_kernels
from engine.experts.copy_engine import CopyEngine
from engine.experts.device_lru import DeviceLRU
from engine.experts.kernel import combine, combine_grouped, gathered_experts, is_small_step, run_expert
from engine.experts.provider import ExpertCounters, start_layer
from engine.experts.routing_ring import RoutingRing
from engine.experts.slot_pool import SlotPool
from engine.experts.store import ExpertStore
from engine.experts.uva import as_words, device_view


class PagedExperts:
    name = "paged"

    def __init__(self, host: ExpertStore, device: torch.device, capacity: dict[int, int], predictor=None):
        self.host, self.layout, self.device = host, host.layout, device
        self._counters = ExpertCounters()
        self.pool = SlotPool(self.layout.numel, next(iter(host.blocks.values())).dtype, device)
        self.lru = {layer: ExpertLRU(0) for layer in host.blocks}
        self.copies = CopyEngine(device, self._counters)
        self.predictor = predictor
        self.routing_listener = None  # (layer, needed experts, is_decode) -> None; the online controller
        self.step_is_prefill = False  # set by the model runner before each forward
        self.moe_layers = list(host.blocks)
        self.device_lru: DeviceLRU | None = None  # the slot state of graphed decode steps
        self.owner = "host"  # who holds the current slot state: "host" (self.lru) or "device"
        self.graph_generation = 0  # bumped when the pool moves: captured graphs are stale
        self.ring = RoutingRing(self.moe_layers, device, self.settle_graphed)
        self.host_words: dict[int, torch.Tensor] | None = None  # device views of the pinned experts
        self.pool_words: torch.Tensor | None = None  # the slot pool viewed as words (the copy kernel's target)
        self.graphed_decode = True  # False: decode steps page on the host (benchmarks compare the two)
        self.set_capacity(capacity)

    @property
    def counters(self) -> ExpertCounters:
        self.settle_graphed()
        return self._counters

    @property
    def capacity(self) -> dict[int, int]:
        return {layer: lru.capacity for layer, lru in self.lru.items()}

    def set_capacity(self, capacity: dict[int, int]) -> None:
        """Change slots per layer (between steps), keeping each layer's most recently used experts that fit."""
        self.to_host()
        kept = {}
        for layer, lru in self.lru.items():
            lru.shrink_to(min(capacity[layer], self.host.num_experts))
            kept[layer] = list(lru.slots)  # oldest first
            lru.slots.clear()
        self.copies.synchronize()
        # Nothing may keep the old pool alive while the new one is allocated (the budget holds one pool).
        self.device_lru, self.pool_words, self.graph_generation = None, None, self.graph_generation + 1
        self.pool.reallocate({layer: lru.capacity for layer, lru in self.lru.items()})
        for layer, experts in kept.items():
            self._load(layer, experts, keep=set())
        self.copies.synchronize()

    def warm(self, experts: dict[int, list[int]]) -> None:
        """Page in the given experts of each layer (up to its capacity) before serving, e.g. from a trace."""
        self.to_host()
        for layer, wanted in experts.items():
            self._load(layer, [e for e in wanted if e not in self.lru[layer]][: self.lru[layer].capacity], keep=set())
        self.copies.synchronize()


    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        self.to_host()
        ids_host = ids.cpu().numpy()  # the one host sync of this layer-step
        needed = [int(e) for e in step_unique(ids_host)]
        if self.routing_listener is not None:
            self.routing_listener(layer, needed, not self.step_is_prefill)
        hits, misses = self.lru[layer].split(needed)
        self._counters.count(layer, len(hits), len(misses))
        self.copies.wait_prefetch(layer)
        self._counters.prefetch_used += self.copies.take_prefetched(layer, hits)
        if is_small_step(ids.shape[0], ids.shape[1], self.host.expert_bytes):
            out = combine(self._gathered(layer, x, ids, ids_host, weights, hits, misses, set(needed)), ids)
        else:
            out = self._per_expert(layer, x, ids, ids_host, weights, hits, misses, set(needed))
        self.lru[layer].touch(needed)
        if self.predictor is not None:
            self._prefetch(layer, needed)
        return out

    def _gathered(self, layer, x, ids, ids_host, weights, hits, misses, pending) -> torch.Tensor:
        """Small step: gather every entry's expert block into one buffer, then two batched GEMVs. Misses that find
        no free or evictable slot (more needed experts than slots) are copied straight into the buffer and stay
        uncached, as on the device (engine.experts.pager_kernels)."""
        flat = ids_host.reshape(-1)
        group = self._load(layer, misses, keep=pending)
        self.copies.wait()
        over = misses[len(group):]
        blocks = self.pool.tensor[self._slots(layer, flat)]
        if over:
            self.copies.copy([(blocks[np.flatnonzero(flat == e)[0]], self.host.blocks[layer][e]) for e in over])
            self.copies.wait()
            for expert in over:  # an expert routed by several tokens: copied once, repeated on the device
                rows = np.flatnonzero(flat == expert)
                if len(rows) > 1:
                    blocks[torch.from_numpy(rows[1:]).to(self.device)] = blocks[int(rows[0])].clone()
        return gathered_experts(x, blocks, weights, self.layout.hidden, self.layout.intermediate)

    def _slots(self, layer: int, experts: np.ndarray) -> torch.Tensor:
        """Each entry's pool row; entries whose expert has no slot get row 0 (overwritten by the caller)."""
        lru = self.lru[layer]
        rows = [lru.slot_of(int(e)) if int(e) in lru else 0 for e in experts]
        return torch.tensor(rows, dtype=torch.long).to(self.device)

    def _per_expert(self, layer, x, ids, ids_host, weights, hits, misses, pending) -> torch.Tensor:
        """Large step (prefill): each expert multiplies its own tokens; misses come in groups that fit. -> [T, D]"""
        dispatch, out = start_layer(x, ids_host, weights)
        index = {int(e): u for u, e in enumerate(dispatch.experts)}
        group = self._load(layer, misses, keep=pending)  # copies overlap with computing the hits
        self._compute(layer, hits, index, dispatch, out, pending)
        while misses:
            group = group or self._load(layer, misses, keep=pending)
            if not group:
                raise RuntimeError(f"layer {layer} has no expert slot to page into")
            self.copies.wait()
            self._compute(layer, group, index, dispatch, out, pending)
            misses, group = misses[len(group):], []
        return combine_grouped(out, dispatch, ids)

    def _load(self, layer: int, misses: list[int], keep: set[int]) -> list[int]:
        """Place and start copying as many misses as fit now; returns the experts being copied."""
        lru, loaded, keep = self.lru[layer], [], set(keep)
        for expert in misses:
            placement = lru.place(expert, keep, lambda: self.pool.take(layer))
            if placement is None:
                break
            self._counters.evictions += placement.evicted is not None
            loaded.append(expert)
            keep.add(expert)  # never evict what this call just placed
        if loaded:
            self.copies.copy([(self.pool.tensor[lru.slot_of(e)], self.host.blocks[layer][e]) for e in loaded])
        return loaded

    def _compute(self, layer, experts, index, dispatch, out, pending: set[int]) -> None:
        lru = self.lru[layer]
        for expert in experts:
            slot = self.pool.tensor[lru.slot_of(expert)]
            run_expert(self.layout.gate_up(slot), self.layout.down(slot), dispatch, index[expert], out)
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
            self._counters.prefetched += len(loaded)

    # Graphed decode steps: the same LRU rule on the device, no host sync (see engine.experts.device_lru).

    def supports_graph(self, tokens: int, top_k: int) -> bool:
        entries = tokens * top_k
        return (self.graphed_decode and pager_kernels.runs_on(self.device) and self.predictor is None
                and (self.host.is_pinned or self.device.type == "cpu") and entries < pager_kernels.STAMP_STRIDE
                and is_small_step(tokens, top_k, self.host.expert_bytes))

    def begin_graph_step(self, tokens: int, top_k: int) -> None:
        """Before a graphed step runs (eagerly or as a replay): the device owns the slot state."""
        if self.device_lru is None:
            if self.host_words is None:
                self.host_words = {layer: device_view(block, self.device) for layer, block in self.host.blocks.items()}
            self.device_lru = DeviceLRU(self.moe_layers, self.host.num_experts, self.capacity, self.pool.base,
                                        self.device)
            self.pool_words = as_words(self.pool.tensor)
            self.owner = "host"
        if self.owner == "host":
            self.copies.synchronize()
            self.device_lru.push(self.lru)
            self.owner = "device"
        self.ring.begin_step(tokens, top_k)

    def cancel_graph_step(self) -> None:
        """A graphed step failed part-way: its slots cannot be trusted (a copy may not have run), so the pool
        starts empty and decode stays on the host pager."""
        self.ring.cancel_step()
        self.graphed_decode, self.owner = False, "host"
        for lru in self.lru.values():
            lru.slots.clear()
        self.set_capacity(self.capacity)

    def forward_graphed(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        rows, miss_src, miss_dst, over_src, over_dst = self.device_lru.step(layer, ids)
        self.device_lru.copy_misses(self.host_words[layer], self.pool_words, miss_src, miss_dst)
        self.ring.record(layer, ids)
        blocks = self.pool.tensor[rows]
        if ids.numel() > self.lru[layer].capacity:  # some misses may find no slot: they come straight to `blocks`
            self.device_lru.copy_misses(self.host_words[layer], as_words(blocks), over_src, over_dst)
        return combine(gathered_experts(x, blocks, weights, self.layout.hidden, self.layout.intermediate), ids)

    def settle_graphed(self) -> None:
        """Fold the device counters and the graphed steps' routing into the host view (never changes the owner)."""
        if self.device_lru is None:
            return
        counts = self.device_lru.take_counts()
        for p, layer in enumerate(self.moe_layers):
            hits, misses, evictions = (int(v) for v in counts[p])
            if hits or misses:
                self._counters.count(layer, hits, misses)
                self._counters.evictions += evictions
                self._counters.h2d_bytes += misses * self.host.expert_bytes
        for layer, ids in self.ring.drain():
            if self.routing_listener is not None:
                self.routing_listener(layer, [int(e) for e in step_unique(ids)], True)

    def to_host(self) -> None:
        """The host LRUs take the slot state back from the device (after graphed steps)."""
        if self.owner == "device":
            self.settle_graphed()
            self.pool.free = self.device_lru.pull(self.lru)
            self.owner = "host"
