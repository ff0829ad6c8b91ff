"""Routed ids of decode steps that run as CUDA graphs, kept on the device until someone reads them.

Inside the graph each MoE layer copies its ids into the current row of a ring; the host marks that row (a
one-hot mask, copied to the device) before each replay and drains the ring (one device->host copy per batch
size) when it is full or counters are read."""

from __future__ import annotations

import numpy as np
import torch


class RoutingRing:
    def __init__(self, layers: list[int], device: torch.device, on_full, capacity: int = 64):
        """on_full(): called when a step finds the ring full; it must drain() it (the provider settles)."""
        self.layers, self.device, self.capacity, self.on_full = layers, device, capacity, on_full
        self.position = {layer: p for p, layer in enumerate(layers)}
        self.buffers: dict[tuple[int, int], torch.Tensor] = {}  # (tokens, top_k) -> [capacity, layers, T, K]
        self.row_host = torch.zeros(capacity, 1, 1, dtype=torch.bool, pin_memory=device.type == "cuda")
        self.row = torch.zeros(capacity, 1, 1, dtype=torch.bool, device=device)  # one-hot: the current step's row
        self.steps: list[tuple[int, int]] = []  # shape of each recorded step, oldest first

    def begin_step(self, tokens: int, top_k: int) -> None:
        """Claim the next row for a step of this shape (before the step runs or replays)."""
        if len(self.steps) >= self.capacity:
            self.on_full()
        if (tokens, top_k) not in self.buffers:
            self.buffers[(tokens, top_k)] = torch.zeros(self.capacity, len(self.layers), tokens, top_k,
                                                        dtype=torch.long, device=self.device)
        self.row_host.zero_()
        self.row_host[len(self.steps)] = True
        self.row.copy_(self.row_host, non_blocking=True)
        self.steps.append((tokens, top_k))

    def cancel_step(self) -> None:
        """The claimed step did not run."""
        self.steps.pop()

    def record(self, layer: int, ids: torch.Tensor) -> None:
        """Inside the graph: this layer's ids [T, K] go to the current row. A masked write over the layer's
        capacity rows (a few KB), not index_copy_: under deterministic algorithms that sorts its index first,
        several kernels per layer and step (the KV-cache writes had cost a fifth of decode that way)."""
        column = self.buffers[tuple(ids.shape)][:, self.position[layer]]  # [capacity, T, K]
        torch.where(self.row, ids[None], column, out=column)

    @torch.inference_mode()
    def drain(self) -> list[tuple[int, np.ndarray]]:
        """-> (layer, ids [T, K]) of every recorded step, in step then layer order; empties the ring."""
        if not self.steps:
            return []
        # A copy (on the CPU, .cpu() would alias the ring, which the next steps overwrite).
        host = {shape: buffer[: len(self.steps)].cpu().numpy().copy() for shape, buffer in self.buffers.items()}
        out = [(layer, host[shape][row, p]) for row, shape in enumerate(self.steps)
               for layer, p in self.position.items()]
        self.steps.clear()
        return out
