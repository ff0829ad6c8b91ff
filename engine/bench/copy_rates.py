"""Host->device copy rates at the pager's copy size: a plain loop of pinned one-expert DMA copies (the
floor's link rate) and the device pager's zero-copy kernel (engine.experts.pager.device_lru) at several grid sizes."""

from __future__ import annotations

import time

import torch

from engine.experts.formats.store import ExpertStore
from engine.system.triton_support import HAS_TRITON


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def copy_loop_rate(store: ExpertStore, device, num_copies: int = 400) -> float:
    """GB/s of a plain loop of one-expert pinned->device copies (the pager's copy size)."""
    layer = next(iter(store.blocks.values()))
    slots = [torch.empty(store.layout.numel, dtype=layer.dtype, device=device) for _ in range(16)]
    experts = torch.randint(0, store.num_experts, (num_copies,)).tolist()
    for i in range(32):
        slots[i % 16].copy_(layer[experts[i]], non_blocking=True)
    _sync(device)
    start = time.perf_counter()
    for i, e in enumerate(experts):
        slots[i % 16].copy_(layer[e], non_blocking=True)
    _sync(device)
    return num_copies * store.expert_bytes / (time.perf_counter() - start) / 1e9


def copy_kernel_rates(store: ExpertStore, device, misses: int = 8, steps: int = 40,
                      splits=(8, 16, 32, 64, 128)) -> dict[int, float]:
    """GB/s of the pager's miss-copy kernel reading `misses` random experts per launch straight from pinned
    memory, for each grid split (programs per expert). Empty off CUDA or without Triton."""
    if device.type != "cuda" or not HAS_TRITON or not store.is_pinned:
        return {}
    from engine.experts.pager.device_lru import DeviceLRU
    from engine.experts.pager.uva import as_words, device_view

    layer, block = next(iter(store.blocks.items()))
    reader = DeviceLRU([layer], store.num_experts, {layer: misses}, {layer: 0}, device)
    source = device_view(block, device)
    pool = torch.empty(misses, store.layout.numel, dtype=block.dtype, device=device)
    target = as_words(pool)
    experts = torch.stack([torch.randperm(store.num_experts, device=device)[:misses] for _ in range(steps)])
    rows = torch.arange(misses, device=device)
    rates = {}
    for split in splits:
        reader.copy_misses(source, target, experts[0], rows, split=split)
        _sync(device)
        start = time.perf_counter()
        for step in range(steps):
            reader.copy_misses(source, target, experts[step], rows, split=split)
        _sync(device)
        rates[split] = steps * misses * store.expert_bytes / (time.perf_counter() - start) / 1e9
    assert torch.equal(pool[0], block[int(experts[-1, 0])].to(device)), "the copy kernel moved the wrong bytes"
    return rates
