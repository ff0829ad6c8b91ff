"""The expert-provider contract: where expert bytes live and how a MoE layer-step reaches them.

The model runner owns one provider and hands it to the MoE blocks every forward. Every provider computes
through its store's ExpertLayout (engine.experts.formats.layout), so outputs are bitwise equal across providers and
slot counts; providers differ only in where the bytes are when the layout's kernels read them."""

from __future__ import annotations

from typing import Callable, Protocol

import torch

from engine.experts.counters import ExpertCounters
from engine.experts.formats.layout import ExpertLayout

RoutingListener = Callable[[int, list[int], bool], None]  # (layer, needed experts by first use, is_decode)


class ExpertForward(Protocol):
    """One MoE layer-step's routed experts."""

    def forward(self, layer: int, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """x [T, D], ids [T, K], weights [T, K] -> the routed experts' combined output [T, D]."""
        ...


class GraphedExperts(ExpertForward, Protocol):
    """A provider's sync-free path for decode steps captured whole in CUDA graphs (engine.runtime.decode_graphs).
    forward() runs inside the capture: no host sync, routing and counts stay on the device until settled."""

    generation: int  # changes whenever graphs captured before would read stale buffers (the slot pool moved)

    def begin_step(self, tokens: int, top_k: int) -> None:
        """Before every graphed step, run eagerly or replayed."""
        ...

    def cancel_step(self) -> None:
        """The graphed step failed before it ran: forget it; the provider stays on its per-layer path."""
        ...


class ExpertProvider(ExpertForward, Protocol):
    """Where experts live: resident, static offload, static-UVA or the WiSP pager."""

    name: str  # the expert mode, as the bench and stats name it
    layout: ExpertLayout

    @property
    def counters(self) -> ExpertCounters:
        """Cumulative traffic, with every graphed step settled (engine thread: may read device buffers)."""
        ...

    def begin_step(self, is_prefill: bool) -> None:
        """Before each forward: what kind of step the routing that follows belongs to."""
        ...

    def add_routing_listener(self, listener: RoutingListener) -> None:
        """Call listener(layer, needed experts, is_decode) for every layer-step, in step order (graphed steps when
        settled). Costs one host sync per layer-step where the provider would not sync anyway."""
        ...

    def graph_path(self, tokens: int, top_k: int) -> GraphedExperts | None:
        """The sync-free path for a decode step of this shape, or None where this provider has none."""
        ...

    def settle(self) -> None:
        """Fold graphed steps' routing into the counters and listeners (barriers call it before deciding)."""
        ...

    def resize(self, layer_slots: list[int]) -> None:
        """Device expert slots per MoE layer, in layer order (between steps, nothing running)."""
        ...

    def synchronize(self) -> None:
        """Wait for every expert copy in flight and account its time."""
        ...
