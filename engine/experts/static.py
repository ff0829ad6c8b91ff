"""Static offload, vLLM --cpu-offload-gb semantics: the experts of the first MoE layers live on the host and
the whole layer is copied to the device on every forward, whichever experts the tokens use."""

from __future__ import annotations

import torch

from engine.experts.kernel import combine, run_expert
from engine.experts.provider import ExpertCounters, start_layer
from engine.experts.store import ExpertStore


class StaticOffloadExperts:
    name = "static"

    def __init__(self, host: ExpertStore, device: torch.device, num_offloaded_layers: int):
        self.host, self.layout = host, host.layout
        layers = list(host.blocks)
        self.offloaded = set(layers[:num_offloaded_layers])
        self.device_blocks = {layer: host.blocks[layer].to(device) for layer in layers if layer not in self.offloaded}
        first = host.blocks[layers[0]]
        self.staging = torch.empty_like(first, device=device) if self.offloaded else None
        self.counters = ExpertCounters()

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        dispatch, out = start_layer(x, ids, ids.cpu().numpy())
        if layer in self.offloaded:
            self.staging.copy_(self.host.blocks[layer], non_blocking=True)
            blocks = self.staging
            self.counters.count(layer, 0, len(dispatch.experts))
            self.counters.h2d_bytes += self.staging.numel() * self.staging.element_size()
        else:
            blocks = self.device_blocks[layer]
            self.counters.count(layer, len(dispatch.experts), 0)
        for u, expert in enumerate(dispatch.experts):
            block = blocks[expert]
            run_expert(x, self.layout.gate_up(block), self.layout.down(block), weights, dispatch, u, out)
        return combine(out, ids)

    @property
    def device_bytes(self) -> int:
        resident = sum(t.numel() * t.element_size() for t in self.device_blocks.values())
        return resident + (self.staging.numel() * self.staging.element_size() if self.staging is not None else 0)
