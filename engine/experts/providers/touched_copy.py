"""Static-UVA baseline (current vLLM --cpu-offload-gb): the experts of the first MoE layers stay in pinned
host memory and each forward moves only the experts it touches across the link, with no cache between
steps. In graphed decode steps the kernel reads them in place over UVA (engine.experts.pager.device_lru with
forget=True: the pager's own copy kernel, so the two arms differ only in caching); elsewhere (prefill, the
CPU) each touched expert is copied into scratch right before use, which moves the same bytes."""

from __future__ import annotations

import numpy as np
import torch

from engine.errors import BudgetError
from engine.experts.pager import pager_kernels
from engine.experts.counters import ExpertCounters
from engine.experts.pager.device_lru import DeviceLRU
from engine.experts.routing.dispatch import is_small_step
from engine.experts.provider import ExpertProvider, GraphedExperts
from engine.experts.routing.routing_feed import FeedsRouting, RoutingFeed
from engine.experts.routing.routing_ring import RoutingRing
from engine.experts.providers.static import split_layers
from engine.experts.formats.store import ExpertStore
from engine.experts.pager.uva import as_words, device_view


class TouchedCopyExperts(FeedsRouting, ExpertProvider):
    name = "static-uva"

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout, self.device = host, host.layout, device
        self.offloaded, self.device_blocks = split_layers(host, device, num_offloaded_layers)
        self.scratch = torch.empty_like(next(iter(host.blocks.values())), device=device)  # one layer of experts
        self._counters = ExpertCounters()
        self.feed = RoutingFeed()
        self.ring = RoutingRing(list(host.blocks), device, self.settle)
        self.graphed = TouchedCopyGraphed(self)
        self.pace = None  # engine.experts.pager.link_pace.LinkPace: copies paced to a slower link (benchmarks)

    def pace_link(self, pace) -> None:
        """Pace every expert copy to a slower link from now on (engine.experts.pager.link_pace; `wisp bench`)."""
        self.pace = pace
        if self.graphed.reader is not None:
            self.graphed.reader.pace = pace

    @property
    def counters(self) -> ExpertCounters:
        self.settle()
        return self._counters

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        ids_host = ids.cpu().numpy()
        if self.feed.has_listeners:
            self.settle()  # graphed steps first: listeners hear steps in order
            self.feed.publish_ids(layer, ids_host)
        used = np.unique(ids_host)
        if layer not in self.offloaded:
            self._counters.count(layer, used.size, 0)
            return self.layout.for_layer(layer).run_blocks(x, ids, weights, self.device_blocks[layer])
        if self.pace is not None:
            self.pace.begin()
        for expert in used:
            self.scratch[expert].copy_(self.host.blocks[layer][expert], non_blocking=True)
        if self.pace is not None:
            self.pace.after_bytes(used.size * self.host.expert_bytes)
        self._counters.count(layer, 0, used.size)
        self._counters.h2d_bytes += used.size * self.host.expert_bytes
        return self.layout.for_layer(layer).run_blocks(x, ids, weights, self.scratch)

    def graph_path(self, tokens: int, top_k: int) -> GraphedExperts | None:
        usable = (not self.graphed.failed and pager_kernels.runs_on(self.device)
                  and (self.host.is_pinned or self.device.type == "cpu")
                  and is_small_step(tokens, top_k, self.host.expert_bytes))
        return self.graphed if usable else None

    def settle(self) -> None:
        drained, uses = self.ring.drain_uses(with_ids=self.feed.has_listeners)
        for layer, count in uses.items():
            if layer not in self.offloaded:
                self._counters.count(layer, count, 0)
        for layer, ids in drained:
            self.feed.publish_ids(layer, ids, is_decode=True)
        reader = self.graphed.reader
        if reader is not None:
            for layer, (_, misses, _) in zip(reader.layers, reader.take_counts()):
                self._counters.count(layer, 0, int(misses))
                self._counters.h2d_bytes += int(misses) * self.host.expert_bytes

    def resize(self, layer_slots: list[int]) -> None:
        raise BudgetError("statically offloaded experts have a fixed layout; live changes need --experts paged")

    def synchronize(self) -> None:
        """Nothing to wait for: the touched experts are copied on the compute stream."""


class TouchedCopyGraphed(GraphedExperts):
    """Graphed decode steps: offloaded layers read their touched experts over UVA into scratch, with no cache."""

    generation = 0  # scratch and the resident layers never move

    def __init__(self, owner: TouchedCopyExperts):
        self.owner, self.failed = owner, False
        self.reader: DeviceLRU | None = None  # counts and copy lists of the graphed steps

    def begin_step(self, tokens: int, top_k: int) -> None:
        owner = self.owner
        if self.reader is None and owner.offloaded:  # a plan that offloads no layer reads nothing from the host
            layers = sorted(owner.offloaded)
            self.reader = DeviceLRU(layers, owner.host.num_experts, dict.fromkeys(layers, 1),
                                    dict.fromkeys(layers, 0), owner.device)
            self.reader.pace = owner.pace
            self.words = {layer: device_view(owner.host.blocks[layer], owner.device) for layer in layers}
            self.scratch_words = as_words(owner.scratch)
        owner.ring.begin_step(tokens, top_k)

    def cancel_step(self) -> None:
        self.owner.ring.cancel_step()
        self.failed = True

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        owner = self.owner
        if layer not in owner.offloaded:
            owner.ring.record(layer, ids)
            return owner.layout.for_layer(layer).run_blocks(x, ids, weights, owner.device_blocks[layer])
        if owner.feed.has_listeners:  # only listeners need an offloaded layer's ids (its counts come from reader)
            owner.ring.record(layer, ids)
        rows, miss_src, miss_dst, _, _ = self.reader.step(layer, ids, forget=True)  # forget: every miss has a row
        self.reader.copy_misses(self.words[layer], self.scratch_words, miss_src, miss_dst)
        return owner.layout.for_layer(layer).run_rows(x, owner.scratch, rows, ids, weights)
