"""Static-UVA baseline (current vLLM --cpu-offload-gb): the experts of the first MoE layers stay in pinned
host memory and each forward moves only the experts it touches across the link, with no cache between
steps. In graphed decode steps the kernel reads them in place over UVA (engine.experts.device_lru with
forget=True: the pager's own copy kernel, so the two arms differ only in caching); elsewhere (prefill, the
CPU) each touched expert is copied into scratch right before use, which moves the same bytes."""

from __future__ import annotations

import numpy as np
import torch

from engine.experts import pager_kernels
from engine.experts.device_lru import DeviceLRU
from engine.experts.kernel import is_small_step, run_rows
from engine.experts.provider import ExpertCounters, run_blocks
from engine.experts.routing_ring import RoutingRing
from engine.experts.static import split_layers
from engine.experts.store import ExpertStore
from engine.experts.uva import as_words, device_view


class TouchedCopyExperts:
    name = "static-uva"
    graph_generation = 0
    graph_failed = False

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout, self.device = host, host.layout, device
        self.offloaded, self.device_blocks = split_layers(host, device, num_offloaded_layers)
        self.scratch = torch.empty_like(next(iter(host.blocks.values())), device=device)  # one layer of experts
        self._counters = ExpertCounters()
        self.ring = RoutingRing(list(host.blocks), device, self.settle_graphed)
        self.reader: DeviceLRU | None = None  # counts and copy lists of the graphed steps

    @property
    def counters(self) -> ExpertCounters:
        self.settle_graphed()
        return self._counters

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        used = np.unique(ids.cpu().numpy())
        if layer not in self.offloaded:
            self._counters.count(layer, used.size, 0)
            return run_blocks(x, ids, weights, self.device_blocks[layer], self.layout)
        for expert in used:
            self.scratch[expert].copy_(self.host.blocks[layer][expert], non_blocking=True)
        self._counters.count(layer, 0, used.size)
        self._counters.h2d_bytes += used.size * self.host.expert_bytes
        return run_blocks(x, ids, weights, self.scratch, self.layout)

    def supports_graph(self, tokens: int, top_k: int) -> bool:
        return (not self.graph_failed and pager_kernels.runs_on(self.device) and (self.host.is_pinned or self.device.type == "cpu")
                and is_small_step(tokens, top_k, self.host.expert_bytes))

    def begin_graph_step(self, tokens: int, top_k: int) -> None:
        if self.reader is None:
            layers = sorted(self.offloaded)
            self.reader = DeviceLRU(layers, self.host.num_experts, dict.fromkeys(layers, 1), dict.fromkeys(layers, 0),
                                    self.device)
            self.words = {layer: device_view(self.host.blocks[layer], self.device) for layer in layers}
            self.scratch_words = as_words(self.scratch)
        self.ring.begin_step(tokens, top_k)

    def cancel_graph_step(self) -> None:
        self.ring.cancel_step()
        self.graph_failed = True

    def forward_graphed(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        if layer not in self.offloaded:
            self.ring.record(layer, ids)
            return run_blocks(x, ids, weights, self.device_blocks[layer], self.layout)
        rows, miss_src, miss_dst, _, _ = self.reader.step(layer, ids, forget=True)  # forget: every miss has a row
        self.reader.copy_misses(self.words[layer], self.scratch_words, miss_src, miss_dst)
        return run_rows(x, self.scratch, rows, ids, weights, self.layout.hidden, self.layout.intermediate)

    def settle_graphed(self) -> None:
        for layer, ids in self.ring.drain():
            if layer not in self.offloaded:
                self._counters.count(layer, int(np.unique(ids).size), 0)
        if self.reader is not None:
            for layer, (_, misses, _) in zip(self.reader.layers, self.reader.take_counts()):
                self._counters.count(layer, 0, int(misses))
                self._counters.h2d_bytes += int(misses) * self.host.expert_bytes
