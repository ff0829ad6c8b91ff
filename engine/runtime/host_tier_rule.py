"""The loaders' host-RAM rule for a set of options (engine.alloc.host_tier), shared by checkpoint and GGUF loads."""

from __future__ import annotations

from functools import partial

from engine.alloc.host_tier import TierPlanner, tier_planner
from engine.config import EngineOptions
from engine.traces.use_counts import trace_use_counts


def host_tier_planner(options: EngineOptions, device_type: str) -> TierPlanner:
    use_counts = partial(trace_use_counts, options.pin_trace) if options.pin_trace else None
    return tier_planner(options.experts, options.experts_on_host(device_type), options.host_budget_bytes, use_counts)
