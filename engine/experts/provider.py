"""Expert providers: where expert bytes live. All of them compute through engine.experts.kernel."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from engine.experts.kernel import Dispatch, combine_grouped, is_small_step, plan_dispatch, run_expert, run_rows
from engine.experts.store import ExpertStore


@dataclass
class ExpertCounters:
    """Cumulative expert traffic; hits + misses = routed (layer, unique expert) uses per step."""

    hits: int = 0
    misses: int = 0
    evictions: int = 0
    h2d_bytes: int = 0
    copy_s: float = 0.0  # time the copy engine spent on expert copies
    timed_bytes: int = 0  # the bytes copy_s covers (copies inside CUDA graphs are counted but not timed)
    prefetched: int = 0
    prefetch_used: int = 0
    layer_hits: dict[int, int] = field(default_factory=dict)
    layer_misses: dict[int, int] = field(default_factory=dict)

    def count(self, layer: int, hits: int, misses: int) -> None:
        self.hits += hits
        self.misses += misses
        self.layer_hits[layer] = self.layer_hits.get(layer, 0) + hits
        self.layer_misses[layer] = self.layer_misses.get(layer, 0) + misses

    @property
    def hit_rate(self) -> float:
        return self.hits / (self.hits + self.misses) if self.hits + self.misses else 1.0

    @property
    def h2d_gb_per_s(self) -> float:
        return self.timed_bytes / self.copy_s / 1e9 if self.copy_s > 0 else 0.0

    def snapshot(self) -> "ExpertCounters":
        return ExpertCounters(self.hits, self.misses, self.evictions, self.h2d_bytes, self.copy_s, self.timed_bytes,
                              self.prefetched, self.prefetch_used, dict(self.layer_hits), dict(self.layer_misses))


def start_layer(x: torch.Tensor, ids_host, weights: torch.Tensor) -> tuple[Dispatch, torch.Tensor]:
    """Plan a large layer-step from the routed ids already on the host, and gather its [T*K, D] buffer: the token
    row of every (token, k) entry, grouped by expert as the plan lists them. Each expert then overwrites its own
    span with its outputs (engine.experts.kernel.run_expert): one gather per layer-step, not one per expert."""
    dispatch = plan_dispatch(ids_host, weights)
    return dispatch, x[dispatch.tokens]


def run_blocks(x, ids, weights, blocks: torch.Tensor, layout) -> torch.Tensor:
    """Every routed expert's block is row `expert id` of `blocks` [E, numel] (resident and whole-layer copies)."""
    if is_small_step(ids.shape[0], ids.shape[1], layout.numel * blocks.element_size()):
        return run_rows(x, blocks, ids.reshape(-1), ids, weights, layout.hidden, layout.intermediate)
    dispatch, out = start_layer(x, ids.cpu().numpy(), weights)
    for u, expert in enumerate(dispatch.experts):
        block = blocks[expert]
        run_expert(layout.gate_up(block), layout.down(block), dispatch, u, out)
    return combine_grouped(out, dispatch, ids)


class ResidentExperts:
    """Every expert on the device: the ceiling, and the reference the other providers must match bit for bit."""

    name = "resident"
    graph_generation = 0
    graph_failed = False

    def __init__(self, store: ExpertStore):
        from engine.experts.routing_ring import RoutingRing
        from engine.experts.use_counter import LazyUseCounter

        self.store = store
        self.layout = store.layout
        self.uses = LazyUseCounter(ExpertCounters())
        device = next(iter(store.blocks.values())).device
        self.ring = RoutingRing(list(store.blocks), device, self.settle_graphed)

    @property
    def counters(self) -> ExpertCounters:
        self.settle_graphed()
        return self.uses.settle()

    def settle_graphed(self) -> None:
        for layer, ids in self.ring.drain():
            self.uses.counters.count(layer, int(np.unique(ids).size), 0)

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        self.uses.record(layer, ids, is_hit=True)
        return run_blocks(x, ids, weights, self.store.blocks[layer], self.layout)

    # Graphed decode steps (one CUDA graph per step): the same compute, routing recorded on the device.

    def supports_graph(self, tokens: int, top_k: int) -> bool:
        return not self.graph_failed and is_small_step(tokens, top_k, self.store.expert_bytes)

    def begin_graph_step(self, tokens: int, top_k: int) -> None:
        self.ring.begin_step(tokens, top_k)

    def cancel_graph_step(self) -> None:
        """The graphed step failed before it ran: forget it and stay on the per-layer path."""
        self.ring.cancel_step()
        self.graph_failed = True

    def forward_graphed(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        self.ring.record(layer, ids)
        return run_blocks(x, ids, weights, self.store.blocks[layer], self.layout)
