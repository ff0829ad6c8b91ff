"""Static-UVA baseline (current vLLM --cpu-offload-gb): the experts of the first MoE layers stay in pinned
host memory and each forward moves only the experts it touches across the link, with no cache between
steps. vLLM's kernel reads them in place over UVA; here each touched expert is copied into scratch right
before use, which moves the same bytes (shared/WISP.md measured copy-then-GEMV at 46 vs UVA 49 GB/s)."""

from __future__ import annotations

import numpy as np
import torch

from engine.experts.provider import ExpertCounters, run_blocks
from engine.experts.static import split_layers
from engine.experts.store import ExpertStore


class TouchedCopyExperts:
    name = "static-uva"

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout = host, host.layout
        self.offloaded, self.device_blocks = split_layers(host, device, num_offloaded_layers)
        self.scratch = torch.empty_like(next(iter(host.blocks.values())), device=device)  # one layer of experts
        self.counters = ExpertCounters()

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        used = np.unique(ids.cpu().numpy())
        if layer not in self.offloaded:
            self.counters.count(layer, used.size, 0)
            return run_blocks(x, ids, weights, self.device_blocks[layer], self.layout)
        for expert in used:
            self.scratch[expert].copy_(self.host.blocks[layer][expert], non_blocking=True)
        self.counters.count(layer, 0, used.size)
        self.counters.h2d_bytes += used.size * self.host.expert_bytes
        return run_blocks(x, ids, weights, self.scratch, self.layout)
