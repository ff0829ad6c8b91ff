"""Build an EngineStats snapshot from the engine's live state (engine thread only)."""

from __future__ import annotations

from typing import Protocol

import torch

from engine.alloc.host_tier import HostTier
from engine.alloc.memory_plan import MemoryPlan
from engine.events import EngineStats
from engine.generation.throughput import Throughput
from engine.runtime.model_runner import ModelRunner
from engine.runtime.scheduler import Scheduler
from engine.runtime.speculation import SpecCounters, Speculation


class Observed(Protocol):
    """What a stats snapshot reads of the engine (engine.runtime.llm_engine.LLMEngine has it)."""

    plan: MemoryPlan
    runner: ModelRunner
    scheduler: Scheduler
    device: torch.device
    throughput: Throughput
    host_tier: HostTier | None
    pending_budget: tuple[int | None, str] | None  # a budget waiting for the next drained barrier, and why
    wsa_curve: tuple[tuple[float, float], ...] | None  # MV-WSA's predicted (expert share, tok/s) points
    speculation: Speculation | None  # drafts and their counters (None: no request has drafted)


def collect_stats(core: Observed) -> EngineStats:
    counters = core.runner.experts.counters
    manager = core.scheduler.block_manager
    pending = core.pending_budget[0] if core.pending_budget else None
    peak = torch.cuda.max_memory_allocated(core.device) if core.device.type == "cuda" else None
    core.throughput.prune()
    tier = core.host_tier
    spec = core.speculation.counters if core.speculation is not None else SpecCounters()
    return EngineStats(
        plan=core.plan, expert_hits=counters.hits, expert_misses=counters.misses, expert_hit_rate=counters.hit_rate,
        h2d_bytes=counters.h2d_bytes, h2d_gb_per_s=counters.h2d_gb_per_s, decode_tok_s=core.throughput.decode_tok_s,
        kv_blocks_used=manager.num_used_blocks, kv_blocks_total=manager.num_blocks,
        running=len(core.scheduler.running), waiting=len(core.scheduler.waiting), pending_budget=pending,
        device_peak_bytes=peak, wsa_curve=core.wsa_curve,
        host_pinned_bytes=tier.in_memory_bytes if tier else 0, host_mapped_bytes=tier.mapped_bytes if tier else 0,
        page_cache_reads=counters.page_cache_reads, page_cache_bytes=counters.page_cache_bytes,
        page_cache_gb_per_s=counters.page_cache_gb_per_s, spec_proposed=spec.num_proposed,
        spec_accepted=spec.num_accepted, spec_verify_misses=spec.verify_misses,
    )
