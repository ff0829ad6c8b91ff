"""Expert weights packed one contiguous block per expert: [gate (I*D) | up (I*D) | down (D*I)]."""

from __future__ import annotations

import warnings

import psutil
import torch

from engine.errors import HostMemoryError


class ExpertLayout:
    """Views into a packed expert block: gate_up [2I, D] (transformers' fused layout) and down [D, I]."""

    def __init__(self, hidden: int, intermediate: int):
        self.hidden, self.intermediate = hidden, intermediate
        self.numel = 3 * hidden * intermediate

    def gate_up(self, block: torch.Tensor) -> torch.Tensor:
        return block[: 2 * self.hidden * self.intermediate].view(2 * self.intermediate, self.hidden)

    def down(self, block: torch.Tensor) -> torch.Tensor:
        return block[2 * self.hidden * self.intermediate :].view(self.hidden, self.intermediate)

    def pack(self, block: torch.Tensor, gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor) -> None:
        n = self.hidden * self.intermediate
        block[:n].copy_(gate.reshape(-1))
        block[n : 2 * n].copy_(up.reshape(-1))
        block[2 * n :].copy_(down.reshape(-1))


class ExpertStore:
    """All experts of all MoE layers: one [E, numel] tensor per layer, on the device or in (pinned) host memory.

    On the host, pinned memory lets a miss be one DMA copy at full link speed; if pinning fails the store
    falls back to pageable memory and says what that costs."""

    def __init__(self, layout: ExpertLayout, moe_layers: list[int], num_experts: int, dtype, device, pin: bool = False):
        self.layout = layout
        self.num_experts = num_experts
        self.warning: str | None = None
        element = torch.empty((), dtype=dtype).element_size()
        total = len(moe_layers) * num_experts * layout.numel * element
        if torch.device(device).type == "cpu":
            check_host_ram(total)
        self.is_pinned = pin
        self.blocks: dict[int, torch.Tensor] = {layer: self._allocate(num_experts, dtype, device) for layer in moe_layers}

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
        tensor = next(iter(self.blocks.values()))
        return self.layout.numel * tensor.element_size()

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
