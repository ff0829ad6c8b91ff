"""Where a decode step's time goes: host (cProfile of the engine loop) vs GPU (kernel time from the torch
profiler), resident experts on a real shape with synthetic weights.

    python -m engine.bench.profile_decode --shape qwen3-30b-a3b --layers 48 --tokens 48
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time

import torch

from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.suite import decode_once, plan_for
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.config import EngineOptions
from engine.runtime.builder import assemble_engine


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m engine.bench.profile_decode")
    add_shape_options(parser, device=False)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--prompt", type=int, default=512)
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    weights = synthetic_weights(shape_of(args), device, experts_on_host=False)
    plan = plan_for(weights, "resident", None, None, 1, 4096)
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda"), plan, device, 4096)
    decode_once(engine, args.prompt, 8, 1, seed=0)  # warm-up: captures the decode graph
    started = time.perf_counter()
    decode_once(engine, args.prompt, args.tokens, 1, seed=1)
    wall = time.perf_counter() - started
    host = cProfile.Profile()
    host.enable()
    decode_once(engine, args.prompt, args.tokens, 1, seed=2)
    host.disable()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        decode_once(engine, args.prompt, args.tokens, 1, seed=3)
    gpu_us = sum(e.device_time_total for e in prof.key_averages())
    kernels = sum(e.count for e in prof.key_averages() if e.device_time_total > 0)
    text = io.StringIO()
    pstats.Stats(host, stream=text).sort_stats("cumulative").print_stats(30)
    print(text.getvalue())
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=25))
    print(json.dumps({"shape": args.shape, "layers": weights.args.num_hidden_layers, "tokens": args.tokens,
                      "request_wall_s": wall, "gpu_kernel_ms_per_request": gpu_us / 1000,
                      "gpu_kernels_per_request": kernels}))


if __name__ == "__main__":
    main()
