"""Sentences about the host tier: expert bytes held in pinned host memory, those left memory-mapped in the model
file, and how fast misses on the mapped ones read the page cache (engine.api.EngineStats)."""

from __future__ import annotations

from typing import Callable

NO_HOST_TIER = "Experts are on the device: none are held in host memory."


def has_host_tier(stats) -> bool:
    """Wisp's engine keeps experts in host memory (paged or static modes, or on the CPU)."""
    return bool(stats.host_pinned_bytes or stats.host_mapped_bytes)


def host_tier_text(stats, format_bytes: Callable[[int], str]) -> str:
    """Two lines: both tiers' sizes, then the page cache's reads (or why there are none)."""
    if not has_host_tier(stats):
        return NO_HOST_TIER
    tiers = (f"Pinned {format_bytes(stats.host_pinned_bytes)} · memory-mapped {format_bytes(stats.host_mapped_bytes)}")
    if not stats.host_mapped_bytes:
        return f"{tiers}\nEvery expert is in host memory: misses never read the model file."
    if not stats.page_cache_reads:
        return f"{tiers}\nPage cache: no reads yet."
    return (f"{tiers}\nPage cache: {stats.page_cache_reads} reads, {format_bytes(stats.page_cache_bytes)} at "
            f"{stats.page_cache_gb_per_s:.2f} GB/s")
