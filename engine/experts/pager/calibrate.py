"""A quick probe of this machine's expert-miss cost (host->device copy rate and per-copy overhead), cached
per device so the configurator and the online controller predict with measured numbers."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from engine.alloc.cost_model import LinkCost
from engine.system.hardware import device_name

PROBE_BYTES = 9 * 1024 * 1024  # one Qwen3-30B-A3B expert


def cache_file(device: torch.device) -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("wisp")) / f"link-{device_name(device).replace(' ', '_')}.json"


def time_copies(sources: list[torch.Tensor], targets: list[torch.Tensor], device: torch.device) -> float:
    """Seconds for one round of copies (after a warm-up round)."""
    for _ in range(2):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        for src, dst in zip(sources, targets):
            dst.copy_(src, non_blocking=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    return time.perf_counter() - start


def measure(device: torch.device, count: int = 32, probe_bytes: int = PROBE_BYTES) -> tuple[float, float]:
    """-> (bytes per second at copies of probe_bytes, fixed seconds per copy). Allocates count x probe_bytes on
    the device for the duration of the probe."""
    pin = device.type == "cuda"
    numel = probe_bytes // 2
    big = [torch.full((numel,), 0.5, dtype=torch.bfloat16, pin_memory=pin) for _ in range(count)]
    small = [t[:2048] for t in big]
    targets = [torch.empty(numel, dtype=torch.bfloat16, device=device) for _ in range(count)]
    big_s = time_copies(big, targets, device)
    small_s = time_copies(small, [t[:2048] for t in targets], device)
    per_copy = small_s / count
    rate = count * numel * 2 / max(big_s - count * per_copy, 1e-9)
    return rate, per_copy


def link_cost(device: torch.device, dense_step_s: float, prefill_token_s: float, refresh: bool = False,
              max_device_bytes: int | None = None) -> LinkCost:
    """The cached probe, or a new one that puts at most max_device_bytes on the device (a loaded engine's idle
    workspace: the probe must stay inside the memory plan)."""
    path = cache_file(device)
    if path.exists() and not refresh:
        cached = json.loads(path.read_text())
        rate, per_copy = cached["h2d_bytes_per_s"], cached["per_miss_s"]
    else:
        rate, per_copy = measure(device, *probe_shape(max_device_bytes))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"h2d_bytes_per_s": rate, "per_miss_s": per_copy}))
    return LinkCost(h2d_bytes_per_s=rate, per_miss_s=per_copy, dense_step_s=dense_step_s, prefill_token_s=prefill_token_s)


def probe_shape(max_device_bytes: int | None) -> tuple[int, int]:
    """(count, bytes per copy) of a probe that fits max_device_bytes: up to 32 one-expert copies."""
    if max_device_bytes is None:
        return 32, PROBE_BYTES
    probe_bytes = max(4096, min(PROBE_BYTES, max_device_bytes) // 2 * 2)
    return max(1, min(32, max_device_bytes // probe_bytes)), probe_bytes


def estimated_compute(dense_bytes: int, active_expert_bytes: int, num_layers: int, device: torch.device):
    """Rough resident compute per decode step and per prompt token: bytes read at memory speed plus launches."""
    if device.type == "cuda":
        return (dense_bytes + active_expert_bytes) / 3.0e12 + num_layers * 250e-6, 2 * active_expert_bytes / 400e12 + 20e-6
    return (dense_bytes + active_expert_bytes) / 15e9 + num_layers * 1e-3, 2 * active_expert_bytes / 100e9


def describe(link: LinkCost) -> dict:
    return asdict(link)
