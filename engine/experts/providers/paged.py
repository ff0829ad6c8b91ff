"""The WiSP expert pager: a pool of device slots holding each layer's recently used experts.

Its parts: the host pager (LRUs, slot pool, copies; engine.experts.pager.host_pager), the device pager for graphed
decode steps (engine.experts.pager.device_pager), an optional prefetcher, and the counters and routing listeners
they share. Results are bitwise those of resident mode."""

from __future__ import annotations

import torch

from engine.alloc.miss_curve import step_unique
from engine.experts.counters import ExpertCounters
from engine.experts.pager.device_pager import DevicePager
from engine.experts.pager.host_pager import HostPager
from engine.experts.pager.prefetcher import Prefetcher
from engine.experts.provider import ExpertProvider, GraphedExperts
from engine.experts.routing.routing_feed import FeedsRouting, RoutingFeed
from engine.experts.routing.routing_ring import RoutingRing
from engine.experts.formats.store import ExpertStore
from engine.expert_modes import ExpertMode


class PagedExperts(FeedsRouting, ExpertProvider):
    name = ExpertMode.PAGED

    def __init__(self, host: ExpertStore, device: torch.device, capacity: dict[int, int], predictor=None):
        self.layout, self.moe_layers = host.layout, list(host.blocks)
        self._counters = ExpertCounters()
        self.feed = RoutingFeed()
        self.host_pager = HostPager(host, device, self._counters)
        self.prefetcher = Prefetcher(predictor, self.moe_layers, self.host_pager) if predictor is not None else None
        ring = RoutingRing(self.moe_layers, device, self.settle)
        self.device_pager = DevicePager(self.host_pager, self.moe_layers, self._counters, self.feed, ring)
        self.set_capacity(capacity)

    @property
    def counters(self) -> ExpertCounters:
        self.settle()
        return self._counters

    @property
    def capacity(self) -> dict[int, int]:
        return self.host_pager.capacity

    def set_capacity(self, capacity: dict[int, int]) -> None:
        """Change slots per layer (between steps), keeping each layer's most recently used experts that fit."""
        self.device_pager.to_host()
        self.host_pager.resize(capacity, self.device_pager.release)

    def resize(self, layer_slots: list[int]) -> None:
        self.set_capacity(dict(zip(self.moe_layers, layer_slots)))

    def warm(self, experts: dict[int, list[int]]) -> None:
        """Page in the given experts of each layer (up to its capacity) before serving, e.g. from a trace."""
        self.device_pager.to_host()
        self.host_pager.warm(experts)

    def pace_link(self, pace) -> None:
        """Pace every expert copy to a slower link from now on (engine.experts.pager.link_pace; `wisp bench`)."""
        self.device_pager.to_host()
        self.host_pager.copies.pace = self.device_pager.pace = pace
        if self.device_pager.state is not None:
            self.device_pager.state.pace = pace

    def page_on_host(self) -> None:
        """Decode steps page on the host from now on, not in graphed steps (benchmarks compare the two)."""
        self.device_pager.is_enabled = False

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        self.device_pager.to_host()
        ids_host = ids.cpu().numpy()  # the one host sync of this layer-step
        needed = [int(e) for e in step_unique(ids_host)]
        self.feed.publish(layer, needed)
        out = self.host_pager.step(layer, x, ids, ids_host, weights, needed)
        if self.prefetcher is not None:
            self.prefetcher.after_step(layer, needed)
        return out

    def graph_path(self, tokens: int, top_k: int) -> GraphedExperts | None:
        usable = self.prefetcher is None and self.device_pager.can_run(tokens, top_k)
        return self.device_pager if usable else None

    def settle(self) -> None:
        self.device_pager.settle()

    def synchronize(self) -> None:
        self.host_pager.copies.synchronize()
