"""A change of the device-memory split, as the engine announces it to plan listeners."""

from __future__ import annotations

from dataclasses import dataclass

from engine.alloc.memory_plan import MemoryPlan


@dataclass(frozen=True)
class PlanEvent:
    """The memory split changed (or a requested change was refused: then `error` says why)."""

    time: float
    old: MemoryPlan
    new: MemoryPlan | None
    reason: str
    error: str | None = None
    stall_s: float = 0.0  # how long applying it held the engine (device work included); captures come later
