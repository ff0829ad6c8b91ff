"""Cumulative expert traffic, as every provider counts it."""

from __future__ import annotations

from dataclasses import dataclass, field, replace


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
    page_cache_reads: int = 0  # misses on rows left in the model file, read through the page cache
    page_cache_bytes: int = 0  # bytes those reads took from the file
    page_cache_s: float = 0.0  # time spent reading them into staging
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

    @property
    def page_cache_gb_per_s(self) -> float:
        return self.page_cache_bytes / self.page_cache_s / 1e9 if self.page_cache_s > 0 else 0.0

    def snapshot(self) -> "ExpertCounters":
        return replace(self, layer_hits=dict(self.layer_hits), layer_misses=dict(self.layer_misses))
