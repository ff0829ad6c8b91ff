"""Is a CUDA graph captured late in a process slower to replay than the process's first ones, with nothing but
plain torch ops in it? On the H200 (bench/results/2026-11-30-h200-session11) the engine's whole-step decode graph
replayed in 8.53 ms as one of the process's first three captures and in 9.42 ms from the fourth on, whether the
earlier graphs were freed or kept. This captures one chain of small kernels (a GEMV and an add, repeated) again
and again and times each capture's replays: there it took 4.136 ms per replay for captures 0-2 and 4.376 ms from
capture 3 on (1400 kernels; 1.181 and 1.250 ms at 400), and a new side stream or a new memory pool per capture
changed nothing.

    python bench/graph_capture_probe.py --kernels 1400 --captures 6 [--keep] [--new-stream] [--new-pool]
"""

from __future__ import annotations

import argparse
import time

import torch


def chain(x: torch.Tensor, weight: torch.Tensor, kernels: int) -> torch.Tensor:
    for _ in range(kernels // 2):
        x = torch.nn.functional.linear(x, weight) + x
    return x


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernels", type=int, default=1400)
    parser.add_argument("--captures", type=int, default=6)
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep every captured graph alive (default: free it)")
    parser.add_argument("--new-stream", action="store_true", help="capture each graph on a new side stream")
    parser.add_argument("--new-pool", action="store_true", help="give each graph a new memory pool")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        parser.error("capturing CUDA graphs needs a CUDA GPU; none is visible here")
    x = torch.randn(1, 2048, dtype=torch.bfloat16, device="cuda")
    weight = torch.randn(2048, 2048, dtype=torch.bfloat16, device="cuda") / 64
    chain(x, weight, args.kernels)  # warm-up outside capture
    torch.cuda.synchronize()
    kept = []
    for capture in range(args.captures):
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream() if args.new_stream else None
        pool = torch.cuda.graph_pool_handle() if args.new_pool else None
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            chain(x, weight, args.kernels)
        graph.replay()
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(args.replays):
            graph.replay()
        torch.cuda.synchronize()
        print(f"capture {capture}: {(time.perf_counter() - started) / args.replays * 1e3:.3f} ms per replay", flush=True)
        if args.keep:
            kept.append(graph)


if __name__ == "__main__":
    main()
