"""Expert weights, one contiguous block per expert in the layout's format, all experts of all MoE layers."""

from __future__ import annotations

import warnings

import psutil
import torch

from engine.errors import HostMemoryError
from engine.experts.layout import ExpertLayout


class ExpertStore:
    """All experts of all MoE layers: one [E, numel] tensor per layer, on the device or in (pinned) host memory.

    On the host, pinned memory lets a miss be one DMA copy at full link speed; if pinning fails the store
    falls back to pageable memory and says what that costs."""

    def __init__(self, layout: ExpertLayout, moe_layers: list[int], num_experts: int, device, pin: bool = False):
        self.layout = layout
        self.num_experts = num_experts
        self.warning: str | None = None
        if torch.device(device).type == "cpu":
            check_host_ram(len(moe_layers) * num_experts * layout.expert_bytes)
        self.is_pinned = pin
        self.blocks: dict[int, torch.Tensor] = {layer: self._allocate(num_experts, layout.dtype, device)
                                                for layer in moe_layers}

    def _allocate(self, num_experts: int, dtype, device) -> torch.Tensor:
        if self.is_pinned:
            try:
                return torch.empty(num_experts, self.layout.numel, dtype=dtype, device=device, pin_memory=True)
            except RuntimeError as err:
                self.is_pinned = False
                self.warning = (f"could not pin host memory for experts ({err}); using pageable memory, which "
                                "copies misses 3-5x slower")
                warnings.warn(self.warning, stacklevel=2)
        return torch.empty(num_experts, self.layout.numel, dtype=dtype, device=device)

    @property
    def expert_bytes(self) -> int:
        return self.layout.expert_bytes

    @property
    def total_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.blocks.values())


def check_host_ram(needed: int) -> None:
    available = psutil.virtual_memory().available
    if needed > available:
        raise HostMemoryError(
            f"the experts need {needed / 1024**3:.1f} GiB of host RAM but only {available / 1024**3:.1f} GiB is "
            "available; close other programs or use a smaller model"
        )
