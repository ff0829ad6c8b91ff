"""Static offload, vLLM --cpu-offload-gb semantics: the experts of the first MoE layers live on the host and
the whole layer is copied to the device on every forward, whichever experts the tokens use."""

from __future__ import annotations

import torch

from engine.errors import BudgetError, HostMemoryError
from engine.experts.counters import ExpertCounters
from engine.experts.provider import ExpertProvider, GraphedExperts
from engine.experts.routing.routing_feed import FeedsRouting, RoutingFeed
from engine.experts.formats.store import ExpertStore
from engine.experts.routing.use_counter import LazyUseCounter
from engine.expert_modes import ExpertMode


def split_layers(host: ExpertStore, device: torch.device, num_offloaded_layers: int):
    """The first MoE layers stay on the host; the others' experts are copied to the device once.
    -> (offloaded layer ids, device blocks of the resident layers)."""
    if not host.is_complete:  # the loader plans the host tier for the mode: this is a caller's mistake
        raise HostMemoryError("static offload copies whole layers from host memory: every expert must be held there")
    layers = list(host.blocks)
    offloaded = set(layers[:num_offloaded_layers])
    return offloaded, {layer: host.blocks[layer].to(device) for layer in layers if layer not in offloaded}


class StaticOffloadExperts(FeedsRouting, ExpertProvider):
    name = ExpertMode.STATIC

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout = host, host.layout
        self.offloaded, self.device_blocks = split_layers(host, device, num_offloaded_layers)
        first = next(iter(host.blocks.values()))
        self.staging = torch.empty_like(first, device=device) if self.offloaded else None
        self.uses = LazyUseCounter(ExpertCounters())
        self.feed = RoutingFeed()

    @property
    def counters(self) -> ExpertCounters:
        return self.uses.settle()

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        offloaded = layer in self.offloaded
        if offloaded:
            self.staging.copy_(self.host.blocks[layer], non_blocking=True)
            self.uses.counters.h2d_bytes += self.staging.numel() * self.staging.element_size()
        if self.feed.has_listeners:
            self.feed.publish_ids(layer, ids.cpu().numpy())
        self.uses.record(layer, ids, is_hit=not offloaded)
        blocks = self.staging if offloaded else self.device_blocks[layer]
        return self.layout.for_layer(layer).run_blocks(x, ids, weights, blocks)

    def graph_path(self, tokens: int, top_k: int) -> GraphedExperts | None:
        """None: each step's whole-layer copies run between per-layer graphs, as vLLM's offload runs them."""
        return None

    def settle(self) -> None:
        self.uses.settle()

    def resize(self, layer_slots: list[int]) -> None:
        raise BudgetError("statically offloaded experts have a fixed layout; live changes need --experts paged")

    def synchronize(self) -> None:
        """Nothing to wait for: the whole-layer copies run on the compute stream."""
