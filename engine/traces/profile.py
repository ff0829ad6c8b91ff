"""A routing trace as the cost model sees it: per-layer LRU hit-rate curves and accesses per step."""

from __future__ import annotations

import numpy as np

from engine.alloc.cost_model import RoutingProfile
from engine.traces.format import Trace
from engine.traces.stats import lru_hit_rates


def decode_accesses(trace: Trace) -> np.ndarray:
    offsets = trace.step_offsets
    decode_steps = [s for s in range(trace.num_steps) if not trace.is_prefill[s]]
    if not decode_steps:
        return np.full(trace.header.num_layers, float(trace.header.top_k))
    counts = [[np.unique(trace.expert_ids[offsets[s]:offsets[s + 1], layer]).size for layer in range(trace.header.num_layers)]
              for s in decode_steps]
    return np.asarray(counts, dtype=float).mean(axis=0)


def prefill_fraction(trace: Trace) -> float:
    offsets = trace.step_offsets
    fractions = [np.unique(trace.expert_ids[offsets[s]:offsets[s + 1], layer]).size / trace.header.num_experts
                 for s in range(trace.num_steps) if trace.is_prefill[s] for layer in range(trace.header.num_layers)]
    return float(np.mean(fractions)) if fractions else 1.0


def routing_profile(trace: Trace) -> RoutingProfile:
    return RoutingProfile(hit_rates=lru_hit_rates(trace), decode_accesses=decode_accesses(trace),
                          prefill_unique_fraction=prefill_fraction(trace), num_experts=trace.header.num_experts,
                          top_k=trace.header.top_k)
