"""Static-UVA baseline (current vLLM --cpu-offload-gb): the experts of the first MoE layers stay in pinned
host memory and each forward moves only the experts it touches across the link, with no cache between
steps. vLLM's kernel reads them in place over UVA; here each touched expert is copied into scratch right
before use, which moves the same bytes (shared/WISP.md measured copy-then-GEMV at 46 vs UVA 49 GB/s)."""

from __future__ import annotations

import torch

from engine.experts.kernel import combine, run_expert
from engine.experts.provider import ExpertCounters, start_layer
from engine.experts.store import ExpertStore


class TouchedCopyExperts:
    name = "static-uva"

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout = host, host.layout
        layers = list(host.blocks)
        self.offloaded = set(layers[:num_offloaded_layers])
        self.device_blocks = {layer: host.blocks[layer].to(device) for layer in layers if layer not in self.offloaded}
        self.scratch = torch.empty(host.num_experts, self.layout.numel, dtype=host.blocks[layers[0]].dtype, device=device)
        self.counters = ExpertCounters()

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        dispatch, out = start_layer(x, ids, ids.cpu().numpy())
        offloaded = layer in self.offloaded
        blocks = self.scratch if offloaded else self.device_blocks[layer]
        for u, expert in enumerate(dispatch.experts):
            if offloaded:
                blocks[expert].copy_(self.host.blocks[layer][expert], non_blocking=True)
            block = blocks[expert]
            run_expert(x, self.layout.gate_up(block), self.layout.down(block), weights, dispatch, u, out)
        used = len(dispatch.experts)
        self.counters.count(layer, 0 if offloaded else used, used if offloaded else 0)
        self.counters.h2d_bytes += used * self.host.expert_bytes if offloaded else 0
        return combine(out, ids)
