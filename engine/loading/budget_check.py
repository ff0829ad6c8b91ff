"""A memory budget is checked against what the machine has before anything is allocated: on the CPU the
device memory is host RAM, so a budget past it would fail deep inside torch's allocator."""

from __future__ import annotations

from engine.config import EngineOptions
from engine.errors import BudgetError
from engine.loading.model_path import is_remote_url
from engine.units import format_bytes


def check_budget_fits(options: EngineOptions) -> None:
    """Raise BudgetError when budget_bytes exceeds the memory of the device the engine will run on."""
    if options.budget_bytes is None or is_remote_url(options.model):
        return
    import psutil
    import torch

    from engine.system.hardware import pick_device

    device = pick_device(options.device)
    if device.type == "cuda":
        total, what = torch.cuda.get_device_properties(device).total_memory, "this GPU's memory"
    else:
        total, what = psutil.virtual_memory().total, "this machine's RAM (the CPU's device memory)"
    if options.budget_bytes > total:
        raise BudgetError(f"a budget of {format_bytes(options.budget_bytes)} is more than {what}, "
                          f"{format_bytes(total)}; give a --budget below that (see `wisp doctor`)")
