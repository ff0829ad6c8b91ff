"""Time the device pager's `lru_step` kernel alone on a CUDA GPU: 48 layers' steps captured in one CUDA graph and
replayed, so the time per step includes what a decode step's graph pays per launch (the kernel and its gap).

    python bench/lru_step_probe.py                      # the kernel in engine/experts/pager_kernels.py
    python bench/lru_step_probe.py --other OLD.py       # and another version of that module, side by side
    git show 435a31c:engine/experts/pager_kernels.py > bench/old_pager_kernels.py   # before session 9 (untracked)

Cases, at the Qwen3-30B-A3B shape (128 experts, top-8): every expert resident (hits only, batch 1); 8 slots per
layer and two disjoint expert sets in turn (8 misses and evictions per step, batch 1); the same at batch 4 (32
slots, 32 misses per step). Each kernel runs with 1, 2 and 4 warps. Prints one JSON line per (kernel, warps, case)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.experts.pager import pager_kernels  # noqa: E402
from engine.experts.pager.device_lru import DeviceLRU  # noqa: E402

LAYERS, EXPERTS, TOP_K = 48, 128, 8
CASES = {  # name -> (tokens, slots per layer, steps that alternate between disjoint expert sets)
    "hits-b1": (1, EXPERTS, 1),
    "misses-b1": (1, TOP_K, 2),
    "misses-b4": (4, 4 * TOP_K, 2),
}


def load_kernels(path: str | None):
    if path is None:
        return pager_kernels.kernels()[0]
    spec = importlib.util.spec_from_file_location("other_pager_kernels", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.kernels()[0]


def time_case(lru_step, warps: int, tokens: int, slots: int, alternating: int,
              replays: int) -> tuple[float, int, int]:
    """-> (microseconds per lru_step launch inside a replayed graph of LAYERS x alternating steps, the timed
    replays' hits, their misses)."""
    device = torch.device("cuda")
    layers = list(range(LAYERS))
    state = DeviceLRU(layers, EXPERTS, {layer: slots for layer in layers},
                      {layer: layer * slots for layer in layers}, device)
    state.lru_step, state.lru_warps = lru_step, warps
    entries = tokens * TOP_K
    sets = [torch.arange(k * entries, (k + 1) * entries, device=device).view(tokens, TOP_K) % EXPERTS
            for k in range(alternating)]

    def step():
        for ids in sets:
            for layer in layers:
                state.step(layer, ids)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):  # compile, then reach the steady state (every step hits, or misses as designed)
            step()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for _ in range(10):
        graph.replay()
    state.take_counts()  # (synchronizes) from here on, only the timed replays count
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    end.synchronize()
    counts = state.take_counts().sum(axis=0)
    per_launch_us = start.elapsed_time(end) * 1e3 / (replays * LAYERS * alternating)
    return per_launch_us, int(counts[0]), int(counts[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", help="another pager_kernels.py to time side by side (e.g. an older version)")
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--warps", default="1,2,4")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("lru_step_probe needs a CUDA GPU", file=sys.stderr)
        return 2
    kernels = {"current": load_kernels(None)}
    if args.other:
        kernels["other"] = load_kernels(args.other)
    for name, lru_step in kernels.items():
        for warps in (int(w) for w in args.warps.split(",")):
            for case, (tokens, slots, alternating) in CASES.items():
                us, hits, misses = time_case(lru_step, warps, tokens, slots, alternating, args.replays)
                print(json.dumps({"kernel": name, "warps": warps, "case": case, "us_per_launch": round(us, 2),
                                  "hits": hits, "misses": misses}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
