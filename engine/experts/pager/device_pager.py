"""The pager's device side: decode steps whose LRU bookkeeping and miss copies run as kernels
(engine.experts.pager.device_lru), so the whole step runs as CUDA graphs with no host sync
(engine.runtime.decode_graphs). The host LRUs and the device state hand over ownership at the switch: the
device takes it before a graphed step, the host takes it back before it pages again (a large step, a resize,
a host-paged step). Graphed steps read misses in place from pinned memory, so they need every expert held there;
a store that leaves experts in the model file pages on the host. Once every layer holds every one of its experts,
graphed steps read their rows from a fixed table instead (engine.experts.pager.held_rows)."""

from __future__ import annotations

import torch

from engine.experts.pager import pager_kernels
from engine.experts.counters import ExpertCounters
from engine.experts.pager.device_lru import DeviceLRU
from engine.experts.pager.held_rows import HeldRows, holds_every_expert
from engine.experts.routing.dispatch import combine, is_small_step
from engine.experts.pager.host_pager import HostPager
from engine.experts.provider import GraphedExperts
from engine.experts.routing.routing_feed import RoutingFeed
from engine.experts.routing.routing_ring import RoutingRing
from engine.experts.pager.uva import as_words, device_view


class DevicePager(GraphedExperts):
    def __init__(self, pager: HostPager, moe_layers: list[int], counters: ExpertCounters, feed: RoutingFeed,
                 ring: RoutingRing):
        self.pager, self.moe_layers, self.counters, self.feed, self.ring = pager, moe_layers, counters, feed, ring
        self.device = pager.device
        self.state: DeviceLRU | None = None  # the slot state of graphed decode steps
        self.owner = "host"  # who holds the current slot state: "host" (the pager's LRUs) or "device"
        self.generation = 0  # bumped when the pool moves: captured graphs are stale
        self.host_words: dict[int, torch.Tensor] | None = None  # device views of the pinned experts
        self.pool_words: torch.Tensor | None = None  # the slot pool viewed as words (the copy kernel's target)
        self.is_enabled = True
        self.held: HeldRows | None = None  # the fixed rows while every layer holds every expert (else None)
        self.pace = None  # engine.experts.pager.link_pace.LinkPace for the graphed steps' miss copies (benchmarks)

    def can_run(self, tokens: int, top_k: int) -> bool:
        store = self.pager.host
        return (self.is_enabled and pager_kernels.runs_on(self.device) and store.is_complete
                and (store.is_pinned or self.device.type == "cpu") and tokens * top_k < pager_kernels.STAMP_STRIDE
                and is_small_step(tokens, top_k, store.expert_bytes))

    def begin_step(self, tokens: int, top_k: int) -> None:
        """Before a graphed step runs (eagerly or as a replay): the device owns the slot state."""
        pager = self.pager
        if self.state is None:
            if self.host_words is None:
                self.host_words = {layer: device_view(block, self.device) for layer, block in pager.host.blocks.items()}
            self.state = DeviceLRU(self.moe_layers, pager.host.num_experts, pager.capacity, pager.pool.base,
                                   self.device)
            self.state.pace = self.pace
            self.pool_words = as_words(pager.pool.tensor)
            self.owner = "host"
        if self.owner == "host":
            pager.copies.synchronize()
            self.state.push(pager.lru)
            if holds_every_expert(pager.lru, pager.host.num_experts):
                self.hold_all().fill_from_lrus(pager.lru)
            else:
                self.stop_holding_all()
            self.owner = "device"
        self.ring.begin_step(tokens, top_k)

    def cancel_step(self) -> None:
        """A graphed step failed part-way: its slots cannot be trusted (a copy may not have run), so the pool
        starts empty and decode stays on the host pager."""
        self.ring.cancel_step()
        self.is_enabled, self.owner = False, "host"
        self.pager.forget()
        self.pager.resize(self.pager.capacity, self.release)

    def hold_all(self) -> HeldRows:
        """Graphed steps read fixed rows from now on; graphs captured on the LRU path are stale."""
        if self.held is None:
            self.held = HeldRows(self.moe_layers, self.pager.host.num_experts, self.device)
            self.generation += 1
        return self.held

    def stop_holding_all(self) -> None:
        if self.held is not None:
            self.held, self.generation = None, self.generation + 1

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        layout = self.pager.layout.for_layer(layer)
        if self.held is not None:  # nothing can miss: no LRU kernel, no copies
            self.ring.record(layer, ids)
            return layout.run_rows(x, self.pager.pool.tensor, self.held.rows(layer, ids), ids, weights)
        rows, miss_src, miss_dst, over_src, over_dst = self.state.step(layer, ids)
        self.state.copy_misses(self.host_words[layer], self.pool_words, miss_src, miss_dst)
        self.ring.record(layer, ids)
        if ids.numel() <= self.pager.lru[layer].capacity:  # every entry has a slot: read them in place
            return layout.run_rows(x, self.pager.pool.tensor, rows, ids, weights)
        blocks = self.pager.pool.tensor[rows]  # some misses may find no slot: they come straight to `blocks`
        self.state.copy_misses(self.host_words[layer], as_words(blocks), over_src, over_dst)
        return combine(layout.run_gathered(x, blocks, weights, ids), ids)

    def settle(self) -> None:
        """Fold the device counters and the graphed steps' routing into the host view (never changes the owner).
        Steps on held rows count each layer's routed experts as hits; the first settle after the pool filled up
        on the device switches to held rows."""
        if self.state is None:
            return
        counts = self.state.take_counts()
        for p, layer in enumerate(self.moe_layers):
            hits, misses, evictions = (int(v) for v in counts[p])
            if hits or misses:
                self.counters.count(layer, hits, misses)
                self.counters.evictions += evictions
                self.counters.h2d_bytes += misses * self.pager.host.expert_bytes
        routed, uses = self.ring.drain_uses(with_ids=self.feed.has_listeners or self.held is not None)
        if self.held is not None:
            self.held.note(routed)
            for layer, hits in uses.items():
                self.counters.count(layer, hits, 0)
        for layer, ids in routed if self.feed.has_listeners else []:
            self.feed.publish_ids(layer, ids, is_decode=True)
        if self.held is None and self.owner == "device" and self.is_filled():
            self.hold_all().fill_from_device(self.state.expert_slot, self.state.base)

    def is_filled(self) -> bool:
        """Every layer has a slot for every expert and the device state holds them all (a sync, once a settle)."""
        num_experts = self.pager.host.num_experts
        return (all(cap >= num_experts for cap in self.state.capacity.values())
                and bool((self.state.expert_slot >= 0).all()))

    def to_host(self) -> None:
        """The host LRUs take the slot state back from the device (after graphed steps)."""
        if self.owner == "device":
            self.settle()
            self.pager.pool.free = self.state.pull(self.pager.lru)
            if self.held is not None:
                self.held.replay(self.pager.lru)
            self.owner = "host"

    def release(self) -> None:
        """Drop every view of the slot pool (before it is reallocated); graphs captured so far are stale."""
        self.state, self.pool_words, self.held, self.generation = None, None, None, self.generation + 1
