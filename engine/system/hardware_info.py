"""What this machine has, as plain data (torch-free: the app shows it before the engine loads)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class HardwareInfo:
    torch_version: str
    cuda_version: str | None
    gpus: tuple[GpuInfo, ...]
    host_total_bytes: int
    host_available_bytes: int
    cpu_count: int

    @property
    def has_cuda(self) -> bool:
        return bool(self.gpus)
