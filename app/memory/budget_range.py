"""The budget slider's range and default from the detected hardware: the GPU's memory when there is one,
else host RAM (the engine then runs on the CPU and the budget caps what it allocates there)."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024**2
GiB = 1024**3
MINIMUM_BUDGET = 256 * MiB
CPU_DEFAULT_CAP = 8 * GiB


@dataclass(frozen=True)
class BudgetRange:
    minimum: int
    maximum: int
    default: int
    description: str


def budget_range(hardware, format_bytes) -> BudgetRange:
    if hardware.gpus:
        gpu = hardware.gpus[0]
        default = max(MINIMUM_BUDGET, int(gpu.free_bytes * 0.9) // MiB * MiB)
        text = (f"{gpu.name}: {format_bytes(gpu.total_bytes)} VRAM ({format_bytes(gpu.free_bytes)} free) · "
                f"host RAM {format_bytes(hardware.host_total_bytes)}")
        return BudgetRange(MINIMUM_BUDGET, gpu.total_bytes // MiB * MiB, default, text)
    default = max(MINIMUM_BUDGET, min(hardware.host_total_bytes // 4, CPU_DEFAULT_CAP) // MiB * MiB)
    text = (f"No CUDA GPU found: running on the CPU. The budget caps the engine's share of host RAM "
            f"({format_bytes(hardware.host_total_bytes)}, {format_bytes(hardware.host_available_bytes)} available).")
    return BudgetRange(MINIMUM_BUDGET, hardware.host_total_bytes // MiB * MiB, default, text)
