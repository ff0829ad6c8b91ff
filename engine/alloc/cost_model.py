"""The MV-WSA cost model (torch-free): expected decode-step latency and TTFT of a split of the expert pool,
from per-layer LRU hit-rate curves (a RoutingProfile, engine.traces.profile reads one from a trace), the
measured link, and the dense compute time."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np



@dataclass(frozen=True)
class LinkCost:
    """Measured on the running machine (or assumed): how long one expert miss and the dense part take."""

    h2d_bytes_per_s: float  # pinned host->device copy rate at one-expert copies
    per_miss_s: float  # fixed cost of a miss beyond the bytes (bookkeeping, launch)
    dense_step_s: float  # a decode step with every expert resident
    prefill_token_s: float  # compute per prompt token with every expert resident

    def miss_s(self, expert_bytes: int) -> float:
        return expert_bytes / self.h2d_bytes_per_s + self.per_miss_s


# PCIe Gen5 x16 as measured on the H200 host (docs/design.md): 47 GB/s at one 9.4 MB expert.
DEFAULT_LINK = LinkCost(h2d_bytes_per_s=47e9, per_miss_s=20e-6, dense_step_s=0.012, prefill_token_s=0.0004)


def link_at(gb_per_s: float) -> LinkCost:
    """DEFAULT_LINK at a measured (or paced) copy rate in GB/s: what the benchmarks plan with."""
    return replace(DEFAULT_LINK, h2d_bytes_per_s=gb_per_s * 1e9)


@dataclass(frozen=True)
class RoutingProfile:
    """What a trace says about the expert side: per-layer hit rate vs slots and accesses per step."""

    hit_rates: np.ndarray  # [L, E+1] LRU hit rate of layer l with s slots
    decode_accesses: np.ndarray  # [L] mean unique experts per decode step
    prefill_unique_fraction: float  # share of a layer's experts a prefill step touches
    num_experts: int
    top_k: int

    @property
    def num_layers(self) -> int:
        return self.hit_rates.shape[0]

    def first_layers(self, count: int) -> "RoutingProfile":
        """The profile of the first `count` layers (a model cut to its first layers replays those of the trace)."""
        return replace(self, hit_rates=self.hit_rates[:count], decode_accesses=self.decode_accesses[:count])


def decode_step_s(profile: RoutingProfile, slots: np.ndarray, link: LinkCost, expert_bytes: int) -> float:
    """Expected decode step time with `slots[l]` slots in layer l."""
    hits = profile.hit_rates[np.arange(profile.num_layers), np.minimum(slots, profile.num_experts)]  # [L]
    misses = (profile.decode_accesses * (1.0 - hits)).sum()
    return link.dense_step_s + misses * link.miss_s(expert_bytes)


def ttft_s(profile: RoutingProfile, slots: np.ndarray, link: LinkCost, expert_bytes: int, prompt_tokens: int) -> float:
    """A prefill streams each needed expert once; resident ones (a fraction slots/E of them) are free."""
    needed = profile.prefill_unique_fraction * profile.num_experts
    resident_share = np.minimum(slots, profile.num_experts) / profile.num_experts  # [L]
    misses = (needed * (1.0 - resident_share)).sum()
    return prompt_tokens * link.prefill_token_s + misses * link.miss_s(expert_bytes)
