"""`wisp doctor`: torch, CUDA, the GPUs and their memory, host RAM and the host budget for experts."""

from __future__ import annotations

from argparse import Namespace

from engine.alloc.host_tier import host_allowance, reserve_bytes
from engine.cli.options import print_json
from engine.units import format_bytes


def register(commands) -> None:
    doctor = commands.add_parser("doctor", help="show torch, CUDA, GPU memory and host RAM")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=doctor_command)


def doctor_command(args: Namespace) -> int:
    from engine.system.hardware import detect

    hw = detect()
    if args.json:
        from dataclasses import asdict

        print_json(asdict(hw))
        return 0
    print(f"torch        {hw.torch_version} (CUDA {hw.cuda_version or 'not built in'})")
    if not hw.gpus:
        print("GPU          none found: Wisp runs on the CPU (slow for large models)")
    for gpu in hw.gpus:
        print(f"GPU {gpu.index}        {gpu.name}: {format_bytes(gpu.total_bytes)} total, {format_bytes(gpu.free_bytes)} free")
    print(f"host RAM     {format_bytes(hw.host_total_bytes)} total, {format_bytes(hw.host_available_bytes)} available")
    print(f"host budget  {format_bytes(host_allowance(None, hw.host_available_bytes, hw.host_total_bytes))} for "
          f"experts (available less a {format_bytes(reserve_bytes(hw.host_total_bytes))} reserve; --host-budget caps "
          "it, paged experts past it stay memory-mapped)")
    print(f"CPU cores    {hw.cpu_count}")
    return 0
