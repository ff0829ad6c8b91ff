"""The pager's host side: each MoE layer's ExpertLRU over its rows of the device slot pool, and the layer-steps
that read the routed ids on the host (one sync) to decide hits, misses and evictions.

Per layer-step: hits and misses -> place misses in free slots or evict the layer's least recently used experts
not needed now -> copy only the misses (a side stream on CUDA, overlapped with gathering the hits) -> compute
through the layout. A step needing more experts than the layer's capacity: a large step fetches them in groups
that fit; a small step copies the misses that find no free or evictable slot straight into its gathered buffer,
uncached (as the device pager does, so batched decode at a small budget still runs as whole-step graphs).
Misses on experts the host tier left in the model file are read through staging (engine.experts.pager.mapped_reads).

A large step (a prompt) touches most experts of a layer once; it must not flush the working set decode steps
built. So a large step never evicts the layer's most recently used experts (PROTECTED_SHARE of its slots): it
streams its misses through the other slots, and the experts it brought in become the least recently used, the
first that later misses evict. Its hits keep their places. With lookahead (engine.experts.pager.lookahead), a large
enough step also queues the next layer's missing experts into a ring of device rows once this layer's copies are
queued, so the link keeps copying while this layer computes."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.experts.pager.copy_engine import CopyEngine
from engine.experts.pager.lookahead import Lookahead, configured_rows
from engine.experts.counters import ExpertCounters
from engine.experts.routing.dispatch import combine, combine_grouped, is_small_step, start_layer
from engine.experts.pager.mapped_reads import RowCopier
from engine.experts.pager.slot_pool import SlotPool
from engine.experts.formats.store import ExpertStore

PROTECTED_SHARE = 0.5  # of a layer's slots: its most recently used experts, kept through a large step


class HostPager:
    def __init__(self, host: ExpertStore, device: torch.device, counters: ExpertCounters):
        self.host, self.layout, self.device, self.counters = host, host.layout, device, counters
        self.pool = SlotPool(self.layout.numel, self.layout.dtype, device)
        self.lru = {layer: ExpertLRU(0) for layer in host.blocks}
        self.copies = CopyEngine(device, counters)
        self.rows = RowCopier(host, self.copies, counters, device)
        self.protected_share = PROTECTED_SHARE
        self.lookahead = Lookahead(self, configured_rows(host.expert_bytes, torch.device(device).type))

    @property
    def capacity(self) -> dict[int, int]:
        return {layer: lru.capacity for layer, lru in self.lru.items()}

    def resize(self, capacity: dict[int, int], release: Callable[[], None]) -> None:
        """Change slots per layer, keeping each layer's most recently used experts that fit. release() drops
        every other reference to the old pool first: the budget holds one pool, never two."""
        self.lookahead.end()
        kept = {}
        for layer, lru in self.lru.items():
            lru.shrink_to(min(capacity[layer], self.host.num_experts))
            kept[layer] = list(lru.slots)  # oldest first
            lru.slots.clear()
        self.copies.synchronize()
        release()
        self.pool.reallocate(self.capacity)
        for layer, experts in kept.items():
            self.load(layer, experts, keep=set())
        self.copies.synchronize()

    def forget(self) -> None:
        """Empty every layer's slots (their contents can no longer be trusted)."""
        self.lookahead.end()
        for lru in self.lru.values():
            lru.slots.clear()

    def warm(self, experts: dict[int, list[int]]) -> None:
        for layer, wanted in experts.items():
            lru = self.lru[layer]
            self.load(layer, [e for e in wanted if e not in lru][: lru.capacity], keep=set())
        self.copies.synchronize()

    def step(self, layer: int, x, ids, ids_host: np.ndarray, weights, needed: list[int]) -> torch.Tensor:
        """One layer-step from the routed ids already on the host. -> [T, D]"""
        hits, misses = self.lru[layer].split(needed)
        is_small = is_small_step(ids.shape[0], ids.shape[1], self.layout.expert_bytes)
        staged = {} if is_small else self.lookahead.take(layer, misses)  # expert -> lookahead ring row
        misses = [e for e in misses if e not in staged]
        self.counters.count(layer, len(hits) + len(staged), len(misses))
        self.counters.prefetch_used += len(staged)
        self.copies.wait_prefetch(layer)
        self.counters.prefetch_used += self.copies.take_prefetched(layer, hits)
        if is_small:
            self.lookahead.end()
            out = self._gathered(layer, x, ids, ids_host, weights, misses, set(needed))
            self.lru[layer].touch(needed)
            return out
        stages = self.lookahead.begin(layer, ids.numel())
        out, streamed = self._per_expert(layer, x, ids, ids_host, weights, hits, misses, set(needed), staged, stages)
        if self.protected_share:
            self.lru[layer].demote(streamed)
        else:
            self.lru[layer].touch(needed)
        if self.lookahead.rows:
            self.lookahead.observe(layer, ids_host)
        if not stages:
            self.lookahead.end()
        return out

    def _gathered(self, layer, x, ids, ids_host, weights, misses, pending) -> torch.Tensor:
        """Small step: every entry reads its slot (layout.run_rows); when some misses found no slot, every entry's
        block is gathered into one buffer and those misses are copied straight into it. -> [T, D]"""
        flat = ids_host.reshape(-1)
        group = self.load(layer, misses, keep=pending)
        self.copies.wait()
        over = misses[len(group):]
        layout, slots = self.layout.for_layer(layer), self._slots(layer, flat)
        if not over:
            return layout.run_rows(x, self.pool.tensor, slots, ids, weights)
        blocks = self.pool.tensor[slots]
        self.rows.copy([(blocks[np.flatnonzero(flat == e)[0]], layer, e) for e in over])
        self.copies.wait()
        for expert in over:  # an expert routed by several tokens: copied once, repeated on the device
            rows = np.flatnonzero(flat == expert)
            if len(rows) > 1:
                blocks[torch.from_numpy(rows[1:]).to(self.device)] = blocks[int(rows[0])].clone()
        return combine(layout.run_gathered(x, blocks, weights, ids), ids)

    def _slots(self, layer: int, experts: np.ndarray) -> torch.Tensor:
        """Each entry's pool row; entries whose expert has no slot get row 0 (overwritten by the caller)."""
        lru = self.lru[layer]
        rows = [lru.slot_of(int(e)) if int(e) in lru else 0 for e in experts]
        return torch.tensor(rows, dtype=torch.long).to(self.device)

    def _per_expert(self, layer, x, ids, ids_host, weights, hits, misses, pending, staged, stages: bool):
        """Large step: each expert multiplies its own tokens; misses stream through the slots outside the layer's
        working set in two alternating halves, so one half copies while the other computes. The hits in those
        slots compute first, freeing them for the first copies, which then overlap the working set's hits, then
        the experts staged for this layer (in the lookahead ring). stages: once every miss is queued, queue the
        next layer's into the ring. -> ([T, D], the experts brought in, in order)"""
        dispatch, out = start_layer(x, ids_host, weights, self.host.num_experts)
        index = {int(e): u for u, e in enumerate(dispatch.experts)}
        lru = self.lru[layer]
        protected, streamed = lru.working_set(self.protected_share), []
        half = max(1, (lru.capacity - len(protected)) // 2)
        self._compute(layer, [e for e in hits if e not in protected], index, dispatch, out, pending)
        in_flight = [self._start_group(layer, misses, half, pending | protected) for _ in range(2)]
        self._compute(layer, [e for e in hits if e in protected], index, dispatch, out, pending)
        if staged:
            self.lookahead.compute(layer, staged, index, dispatch, out)
            pending.difference_update(staged)
        if stages and not misses:
            self.lookahead.stage(layer)
            stages = False
        while in_flight:
            group, copied = in_flight.pop(0)
            if not group:
                if misses and not in_flight:
                    raise RuntimeError(f"layer {layer} has no expert slot to page into")
                continue
            self.copies.wait_for(copied)
            self._compute(layer, group, index, dispatch, out, pending)
            streamed += group
            in_flight.append(self._start_group(layer, misses, half, pending | protected))  # the slots just freed
            if stages and not misses:
                self.lookahead.stage(layer)
                stages = False
        return combine_grouped(out, dispatch, ids), streamed

    def _start_group(self, layer: int, misses: list[int], size: int, keep: set[int]):
        """Start copying up to `size` of the misses (taken off the list) into slots outside `keep`.
        -> (the experts, their copies' event)"""
        group = self.load(layer, misses[:size], keep)
        del misses[: len(group)]
        return group, self.copies.last_event

    def load(self, layer: int, misses: list[int], keep: set[int]) -> list[int]:
        """Place and start copying as many misses as fit now; returns the experts being copied."""
        lru, loaded, keep = self.lru[layer], [], set(keep)
        for expert in misses:
            placement = lru.place(expert, keep, lambda: self.pool.take(layer))
            if placement is None:
                break
            self.counters.evictions += placement.evicted is not None
            loaded.append(expert)
            keep.add(expert)  # never evict what this call just placed
        if loaded:
            self.rows.copy([(self.pool.tensor[lru.slot_of(e)], layer, e) for e in loaded])
        return loaded

    def _compute(self, layer, experts, index, dispatch, out, pending: set[int]) -> None:
        """The group of experts now in slots, in one layout call (one grouped launch per projection on CUDA)."""
        lru = self.lru[layer]
        units = [index[expert] for expert in experts]
        slots = [lru.slot_of(expert) for expert in experts]
        self.layout.for_layer(layer).run_group(self.pool.tensor, dispatch, units, slots, out)
        pending.difference_update(experts)
