"""What this machine has: torch, CUDA, GPU name and memory (NVML, else torch), host RAM (psutil)."""

from __future__ import annotations

import psutil
import torch

from engine.system.hardware_info import GpuInfo, HardwareInfo


def nvml_gpus() -> tuple[GpuInfo, ...] | None:
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return None
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(GpuInfo(i, name.decode() if isinstance(name, bytes) else name, memory.total, memory.free))
        return tuple(gpus)
    except Exception:
        return None
    finally:
        pynvml.nvmlShutdown()


def device_name(device: torch.device) -> str:
    """The GPU's name for a CUDA device, else "cpu" (results files, the link-probe cache, reports)."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def torch_gpus() -> tuple[GpuInfo, ...]:
    if not torch.cuda.is_available():
        return ()
    gpus = []
    for i in range(torch.cuda.device_count()):
        free, total = torch.cuda.mem_get_info(i)
        gpus.append(GpuInfo(i, torch.cuda.get_device_name(i), total, free))
    return tuple(gpus)


def detect() -> HardwareInfo:
    memory = psutil.virtual_memory()
    gpus = nvml_gpus() if torch.cuda.is_available() else ()
    return HardwareInfo(
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        gpus=gpus or torch_gpus(),
        host_total_bytes=memory.total,
        host_available_bytes=memory.available,
        cpu_count=psutil.cpu_count() or 1,
    )


def pick_device(requested: str) -> torch.device:
    from engine.errors import RequestError

    if requested == "cuda" and not torch.cuda.is_available():
        raise RequestError("--device cuda was asked for but this torch build sees no CUDA GPU (see `wisp doctor`)")
    if requested == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(requested)
