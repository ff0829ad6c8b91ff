"""Is a CUDA graph captured late in a process slower to replay than the process's first ones, with nothing but
plain torch ops in it? On the H200 (bench/results/2026-11-30-graph-capture-order) the engine's whole-step decode graph
replayed in 8.53 ms as one of the process's first three captures and in 9.42 ms from the fourth on, whether the
earlier graphs were freed or kept. This captures one chain of small kernels (a GEMV and an add, repeated) again
and again and times each capture's replays: there it took 4.136 ms per replay for captures 0-2 and 4.376 ms from
capture 3 on (1400 kernels; 1.181 and 1.250 ms at 400), and a new side stream or a new memory pool per capture
changed nothing.

    python bench/graph_capture_probe.py --kernels 1400 --captures 6 [--keep] [--new-stream] [--new-pool]
    python bench/graph_capture_probe.py --mode update
    python bench/graph_capture_probe.py --mode instantiate --flags 8

Modes (the last two call the CUDA runtime that torch loaded, through ctypes, to separate torch from the driver;
they were written after session 11's device time was spent and have not run on a GPU yet):
- torch: each capture instantiated and replayed by torch (CUDAGraph.replay).
- update: every later capture is written into the first capture's executable graph (cudaGraphExecUpdate), which
  is then replayed; if that keeps the first captures' speed, an engine could re-plan without a new executable.
- instantiate: each capture instantiated with cudaGraphInstantiateWithFlags (--flags: 0, 1 auto-free on launch,
  8 use node priority) and launched with cudaGraphLaunch.
"""

from __future__ import annotations

import argparse
import ctypes
import time

import torch


def chain(x: torch.Tensor, weight: torch.Tensor, kernels: int) -> torch.Tensor:
    for _ in range(kernels // 2):
        x = torch.nn.functional.linear(x, weight) + x
    return x


def cudart() -> ctypes.CDLL:
    """The CUDA runtime library this process's torch loaded (the same one, so its graph handles are valid)."""
    torch.cuda.init()
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "libcudart" in line}
    if not paths:
        raise SystemExit("no libcudart in this process's memory map: torch links the CUDA runtime statically here")
    lib = ctypes.CDLL(sorted(paths)[0])
    for name in ("cudaGraphExecUpdate", "cudaGraphInstantiateWithFlags", "cudaGraphLaunch", "cudaGraphExecDestroy"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def check(status: int, what: str) -> None:
    if status != 0:
        raise SystemExit(f"{what} failed with cudaError {status}")


def timed(replay, replays: int) -> float:
    replay()
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(replays):
        replay()
    torch.cuda.synchronize()
    return (time.perf_counter() - started) / replays * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=1400)
    parser.add_argument("--captures", type=int, default=6)
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--mode", choices=["torch", "update", "instantiate"], default="torch")
    parser.add_argument("--flags", type=int, default=0, help="--mode instantiate: cudaGraphInstantiateWithFlags flags")
    parser.add_argument("--keep", action="store_true", help="keep every captured graph alive (default: free it)")
    parser.add_argument("--new-stream", action="store_true", help="capture each graph on a new side stream")
    parser.add_argument("--new-pool", action="store_true", help="give each graph a new memory pool")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("capturing CUDA graphs needs a CUDA GPU; none is visible here")
    lib = cudart() if args.mode != "torch" else None
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device="cuda")
    weight = torch.randn(2048, 2048, dtype=torch.bfloat16, device="cuda") / 64
    chain(x, weight, args.kernels)  # warm-up outside capture
    torch.cuda.synchronize()
    kept, first = [], None
    for capture in range(args.captures):
        graph = torch.cuda.CUDAGraph(keep_graph=args.mode != "torch")
        stream = torch.cuda.Stream() if args.new_stream else None
        pool = torch.cuda.graph_pool_handle() if args.new_pool else None
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            chain(x, weight, args.kernels)
        if args.mode == "torch" or (args.mode == "update" and first is None):
            if args.mode == "update":
                graph.instantiate()
                first = graph
            ms = timed(graph.replay, args.replays)
        elif args.mode == "update":  # this capture's kernels, run by the first capture's executable graph
            info = ctypes.create_string_buffer(64)  # cudaGraphExecUpdateResultInfo
            check(lib.cudaGraphExecUpdate(ctypes.c_void_p(first.raw_cuda_graph_exec()),
                                          ctypes.c_void_p(graph.raw_cuda_graph()), info), "cudaGraphExecUpdate")
            ms = timed(first.replay, args.replays)
        else:
            graph_exec = ctypes.c_void_p()
            check(lib.cudaGraphInstantiateWithFlags(ctypes.byref(graph_exec), ctypes.c_void_p(graph.raw_cuda_graph()),
                                                    ctypes.c_ulonglong(args.flags)), "cudaGraphInstantiateWithFlags")
            current = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            ms = timed(lambda: check(lib.cudaGraphLaunch(graph_exec, current), "cudaGraphLaunch"), args.replays)
            check(lib.cudaGraphExecDestroy(graph_exec), "cudaGraphExecDestroy")
        print(f"{args.mode} capture {capture}: {ms:.3f} ms per replay", flush=True)
        if args.keep or args.mode == "update":  # update: the first executable reads this capture's buffers
            kept.append(graph)


if __name__ == "__main__":
    main()
