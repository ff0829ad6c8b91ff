"""The host tier: which expert rows the engine keeps in (pinned) host memory and which stay memory-mapped from
the model file. Torch-free.

Host RAM is a budget too: the engine may pin min(the user's cap, available RAM less a reserve for the OS and the
app). Rows that fit are pinned (most used first when use counts are known, else in layer order); the rest are read
from the file through the page cache on a miss, into a few pinned staging rows, then copied to the device as usual."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import psutil

from engine.errors import HostMemoryError
from engine.expert_modes import ExpertMode
from engine.units import format_bytes

GiB = 1024**3
MIN_RESERVE_BYTES = 2 * GiB  # left to the OS and the app (its Qt windows, the tokenizer, Python itself)
RESERVE_FRACTION = 8  # ... or an eighth of the machine's RAM, whichever is larger
STAGING_ROWS = 8  # pinned rows mapped misses are read into: a top-8 step's misses without waiting on a copy


@dataclass(frozen=True)
class HostTier:
    """Expert rows per MoE layer held in host memory; every other row is read from the mapped file."""

    row_bytes: int
    num_experts: int
    in_memory: dict[int, tuple[int, ...]]  # {layer: experts held in memory, ascending}
    staging_rows: int = 0  # pinned staging rows for mapped misses (0 when every row is in memory)

    @property
    def is_complete(self) -> bool:
        return all(len(rows) == self.num_experts for rows in self.in_memory.values())

    @property
    def num_in_memory(self) -> int:
        return sum(len(rows) for rows in self.in_memory.values())

    @property
    def num_mapped(self) -> int:
        return len(self.in_memory) * self.num_experts - self.num_in_memory

    @property
    def in_memory_bytes(self) -> int:
        """Pinned (or, on the CPU, pageable) host bytes: the rows held plus the staging rows."""
        return (self.num_in_memory + self.staging_rows) * self.row_bytes

    @property
    def mapped_bytes(self) -> int:
        """Row bytes left in the file: misses on them read the page cache."""
        return self.num_mapped * self.row_bytes


def gib(num_bytes: int) -> str:
    return format_bytes(num_bytes)


def reserve_bytes(total_bytes: int) -> int:
    return max(MIN_RESERVE_BYTES, total_bytes // RESERVE_FRACTION)


def host_allowance(cap_bytes: int | None, available_bytes: int, total_bytes: int) -> int:
    """Bytes of expert rows the engine may hold in host memory: min(cap, available less the reserve)."""
    allowed = max(0, available_bytes - reserve_bytes(total_bytes))
    return allowed if cap_bytes is None else min(cap_bytes, allowed)


def machine_allowance(cap_bytes: int | None) -> int:
    """host_allowance on this machine now (psutil)."""
    memory = psutil.virtual_memory()
    return host_allowance(cap_bytes, memory.available, memory.total)


def staging_rows(num_experts: int) -> int:
    """Staging rows of a store with experts left in the file (one copy call pages within one layer)."""
    return min(STAGING_ROWS, num_experts)


def plan_host_tier(layers: list[int], num_experts: int, row_bytes: int, allowance_bytes: int,
                   can_map: bool, use_counts: dict[int, list[int]] | None = None) -> HostTier:
    """Which rows to hold. can_map: the caller can read the other rows from the file (paged mode); otherwise
    every row must fit. use_counts {layer: [uses per expert]} ranks rows most used first (ties in layer order).
    Raises HostMemoryError with one line when nothing can work."""
    total = len(layers) * num_experts * row_bytes
    if total <= allowance_bytes:
        return HostTier(row_bytes, num_experts, {layer: tuple(range(num_experts)) for layer in layers})
    if not can_map:
        raise HostMemoryError(
            f"the experts need {gib(total)} of host RAM but the engine may use {gib(allowance_bytes)} (the host "
            "budget, or available RAM less a reserve for the system); use --experts paged, which keeps the rest "
            "memory-mapped from the model file")
    num_staging = staging_rows(num_experts)
    if allowance_bytes < num_staging * row_bytes:
        raise HostMemoryError(
            f"paging experts from the model file needs {gib(num_staging * row_bytes)} of host RAM to stage "
            f"{num_staging} experts but the engine may use {gib(allowance_bytes)}; raise --host-budget or close "
            "other programs")
    num_rows = (allowance_bytes - num_staging * row_bytes) // row_bytes
    ranked = ranked_rows(layers, num_experts, use_counts)[:num_rows]
    held = {layer: tuple(sorted(e for owner, e in ranked if owner == layer)) for layer in layers}
    return HostTier(row_bytes, num_experts, held, staging_rows=num_staging)


def ranked_rows(layers: list[int], num_experts: int, use_counts: dict[int, list[int]] | None) -> list[tuple[int, int]]:
    """(layer, expert) rows, the ones to hold first: by uses (descending) when known, else in layer order."""
    rows = [(layer, expert) for layer in layers for expert in range(num_experts)]
    if not use_counts:
        return rows
    order = {row: position for position, row in enumerate(rows)}
    return sorted(rows, key=lambda row: (-use_counts.get(row[0], [0] * num_experts)[row[1]], order[row]))


TierPlanner = Callable[[list[int], int, int], "HostTier | None"]  # (MoE layers, experts per layer, row bytes)


UseCounts = Callable[[list[int], int], dict[int, list[int]]]  # (MoE layers, experts per layer) -> uses per expert


def tier_planner(mode: str, experts_on_host: bool, cap_bytes: int | None,
                 use_counts: UseCounts | None = None) -> TierPlanner:
    """How a load of the given expert mode picks its host tier: None (nothing on the host) when the experts live
    on the device; paged mode may leave rows in the file, resident (on the CPU) and static hold them all.
    use_counts (a routing trace's, say) ranks the rows to pin when not all fit."""

    def plan(layers: list[int], num_experts: int, row_bytes: int) -> HostTier | None:
        if not experts_on_host:
            return None
        counts = use_counts(layers, num_experts) if use_counts else None
        return plan_host_tier(layers, num_experts, row_bytes, machine_allowance(cap_bytes),
                              can_map=mode == ExpertMode.PAGED, use_counts=counts)

    return plan
