"""Every expert on the device: the ceiling, and the reference the other providers must match bit for bit."""

from __future__ import annotations

import torch

from engine.errors import BudgetError
from engine.experts.counters import ExpertCounters
from engine.experts.routing.dispatch import is_small_step
from engine.experts.provider import ExpertProvider, GraphedExperts
from engine.experts.routing.routing_feed import FeedsRouting, RoutingFeed
from engine.experts.routing.routing_ring import RoutingRing
from engine.experts.formats.store import ExpertStore
from engine.experts.routing.use_counter import LazyUseCounter
from engine.expert_modes import ExpertMode


class ResidentExperts(FeedsRouting, ExpertProvider):
    name = ExpertMode.RESIDENT

    def __init__(self, store: ExpertStore):
        self.store, self.layout = store, store.layout
        self.uses = LazyUseCounter(ExpertCounters())
        self.feed = RoutingFeed()
        device = next(iter(store.blocks.values())).device
        self.ring = RoutingRing(list(store.blocks), device, self.settle)
        self.graphed = ResidentGraphed(self)

    @property
    def counters(self) -> ExpertCounters:
        self.settle()
        return self.uses.settle()

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        if self.feed.has_listeners:
            self.settle()  # graphed steps first: listeners hear steps in order
            self.feed.publish_ids(layer, ids.cpu().numpy())
        self.uses.record(layer, ids, is_hit=True)
        return self.layout.for_layer(layer).run_blocks(x, ids, weights, self.store.blocks[layer])

    def graph_path(self, tokens: int, top_k: int) -> GraphedExperts | None:
        small = is_small_step(tokens, top_k, self.store.expert_bytes)
        return self.graphed if small and not self.graphed.failed else None

    def settle(self) -> None:
        drained, uses = self.ring.drain_uses(with_ids=self.feed.has_listeners)
        for layer, count in uses.items():
            self.uses.counters.count(layer, count, 0)
        for layer, ids in drained:
            self.feed.publish_ids(layer, ids, is_decode=True)

    def resize(self, layer_slots: list[int]) -> None:
        raise BudgetError("resident experts have no slots to resize; live changes need --experts paged")

    def synchronize(self) -> None:
        """Nothing to wait for: resident experts are never copied."""


class ResidentGraphed(GraphedExperts):
    """Graphed decode steps on resident experts: the same compute, routing recorded on the device."""

    generation = 0  # the experts never move

    def __init__(self, owner: ResidentExperts):
        self.owner, self.failed = owner, False

    def begin_step(self, tokens: int, top_k: int) -> None:
        self.owner.ring.begin_step(tokens, top_k)

    def cancel_step(self) -> None:
        self.owner.ring.cancel_step()
        self.failed = True

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        self.owner.ring.record(layer, ids)
        return self.owner.layout.for_layer(layer).run_blocks(x, ids, weights, self.owner.store.blocks[layer])
