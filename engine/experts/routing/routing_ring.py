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
        self.buffers: dict[tuple[int, int], torch.Tensor] = {}  # (tokens, top_k) -> [layers, capacity, T, K]
        # Row r's one-hot mask, never written after this: a step launched before the last one's copy ran (the
        # engine's overlapped steps) cannot change what that copy reads.
        self.rows_host = torch.eye(capacity, dtype=torch.bool).view(capacity, capacity, 1, 1)
        if device.type == "cuda":
            self.rows_host = self.rows_host.pin_memory()
        self.row = torch.zeros(capacity, 1, 1, dtype=torch.bool, device=device)  # one-hot: the current step's row
        self.steps: list[tuple[int, int]] = []  # shape of each recorded step, oldest first

    def begin_step(self, tokens: int, top_k: int) -> None:
        """Claim the next row for a step of this shape (before the step runs or replays)."""
        if len(self.steps) >= self.capacity:
            self.on_full()
        if (tokens, top_k) not in self.buffers:
            self.buffers[(tokens, top_k)] = torch.zeros(len(self.layers), self.capacity, tokens, top_k,
                                                        dtype=torch.long, device=self.device)
        self.row.copy_(self.rows_host[len(self.steps)], non_blocking=True)
        self.steps.append((tokens, top_k))

    def cancel_step(self) -> None:
        """The claimed step did not run."""
        self.steps.pop()

    def record(self, layer: int, ids: torch.Tensor) -> None:
        """Inside the graph: this layer's ids [T, K] go to the current row. A masked write over the layer's
        capacity rows (a few KB, contiguous: one vectorized kernel), not index_copy_: under deterministic
        algorithms that sorts its index first, several kernels per layer and step."""
        column = self.buffers[tuple(ids.shape)][self.position[layer]]  # [capacity, T, K]
        torch.where(self.row, ids[None], column, out=column)

    def drain(self) -> list[tuple[int, np.ndarray]]:
        """-> (layer, ids [T, K]) of every recorded step, in step then layer order; empties the ring."""
        return self.drain_uses(with_ids=True)[0]

    @torch.inference_mode()
    def drain_uses(self, with_ids: bool) -> tuple[list[tuple[int, np.ndarray]], dict[int, int]]:
        """-> (drain()'s list, or [] unless with_ids; each layer's routed uses: the unique experts of each recorded
        step, summed over the steps); empties the ring. The uses of all steps of a shape are counted in one
        vectorized pass (a sort along each step's ids): the host drains while the GPU waits for the next step."""
        if not self.steps:
            return [], {}
        # A copy (on the CPU, .cpu() would alias the ring, which the next steps overwrite).
        host = {shape: buffer[:, : len(self.steps)].transpose(0, 1).cpu().numpy().copy()
                for shape, buffer in self.buffers.items()}  # [steps, layers, T, K]
        uses = np.zeros(len(self.layers), dtype=np.int64)
        rows_of: dict[tuple[int, int], list[int]] = {}
        for row, shape in enumerate(self.steps):
            rows_of.setdefault(shape, []).append(row)
        for shape, rows in rows_of.items():
            ids = np.sort(host[shape][rows].reshape(len(rows), len(self.layers), -1), axis=-1)  # [steps, layers, T*K]
            uses += (1 + (np.diff(ids, axis=-1) != 0).sum(axis=-1)).sum(axis=0)
        out = [(layer, host[shape][row, p]) for row, shape in enumerate(self.steps)
               for layer, p in self.position.items()] if with_ids else []
        self.steps.clear()
        return out, {layer: int(uses[p]) for layer, p in self.position.items()}
