"""How the device budget is spent right now, as bar segments (pure Python, from a MemoryPlan and EngineStats)."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine_api import ExpertMode

SEGMENT_LABELS = {
    "dense": "Dense weights", "experts": "Expert slots, filled", "experts_free": "Expert slots, empty",
    "kv": "KV cache, used", "kv_free": "KV cache, free", "state": "Linear-attention state", "workspace": "Workspace",
    "free": "Unplanned",
}


@dataclass(frozen=True)
class Segment:
    key: str  # a key of SEGMENT_LABELS; the theme colour is "segment_<key>"
    num_bytes: int

    @property
    def label(self) -> str:
        return SEGMENT_LABELS[self.key]


def filled_expert_bytes(plan, stats) -> int:
    """Paged slots start empty and each miss fills one until all are full (only then do misses evict), so
    min(misses, slots) slots hold an expert. Other modes keep their experts on the device from the start."""
    if plan.mode != ExpertMode.PAGED or stats is None:
        return plan.expert_device_bytes
    num_slots = plan.expert_device_bytes // plan.expert_bytes  # per-layer slot counts may differ (MV-WSA)
    return min(stats.expert_misses, num_slots) * plan.expert_bytes


def memory_segments(plan, stats=None) -> list[Segment]:
    experts_filled = filled_expert_bytes(plan, stats)
    kv_used = min(stats.kv_blocks_used * plan.kv_block_bytes, plan.kv_bytes) if stats is not None else 0
    state = getattr(plan, "state_bytes", 0)  # hybrid models' linear-attention state; other plans have none
    return [
        Segment("dense", plan.dense_bytes),
        Segment("experts", experts_filled),
        Segment("experts_free", plan.expert_device_bytes - experts_filled),
        Segment("kv", kv_used),
        Segment("kv_free", plan.kv_bytes - kv_used),
        *([Segment("state", state)] if state else []),
        Segment("workspace", plan.workspace_bytes),
        Segment("free", max(plan.free_bytes or 0, 0)),
    ]


def expert_share(plan) -> float:
    """The experts' part of the pool that MV-WSA splits between expert slots and the KV cache."""
    pool = plan.expert_device_bytes + plan.kv_bytes
    return plan.expert_device_bytes / pool if pool else 0.0
