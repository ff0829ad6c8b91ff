"""Time one large (prefill) MoE layer-step of the per-expert path alone: ExpertLayout.run_blocks on
random routing, deterministic algorithms on, as the engine runs it. With --other, the same step through another
version of engine/experts/kernel.py, side by side, and whether the two agree bit for bit: the scatter-then-combine
path (before session 9) or session 9's grouped path (each expert gathering its own rows into a fresh buffer).

    python bench/prefill_step_probe.py                  # CUDA if there is one, else the CPU
    git show 8ca8ecb~1:engine/experts/kernel.py > bench/old_kernel.py   # before session 9's grouped prefill
    git show 0cac00f:engine/experts/kernel.py > bench/old_kernel.py     # session 9's grouped prefill
    python bench/prefill_step_probe.py --other bench/old_kernel.py

Measured (ms per layer-step, same bits every time):
- H200, Qwen3 geometry (--tokens 512 --hidden 2048 --intermediate 768): scatter 49.88, session 9's grouped 25.88;
  --tokens 10000 --repeats 3: 56.67 and 34.67 (bench/results/2026-11-29-grouped-prefill).
- Development machine's CPU (2 cores), --tokens 512 --hidden 16 --intermediate 8 --repeats 20, where the host's
  work is all there is: scatter 11.6-13.3, session 9's grouped 11.2-12.4, session 10's in-place 8.4-8.9."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.quant.dense_layout import DenseLayout  # noqa: E402
from engine.runtime.determinism import use_deterministic_kernels  # noqa: E402


def other_path(path: str):
    """run_blocks as another kernel.py computes it: the scatter path (plan, scatter into [T, K, D], combine) or
    session 9's grouped path (per expert: gather its rows, compute, write its span of a fresh [T*K, D] buffer)."""
    spec = importlib.util.spec_from_file_location("other_kernel", path)
    old = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(old)

    def scatter(x, ids, weights, blocks, layout):
        dispatch = old.plan_dispatch(ids.cpu().numpy(), x.device)
        out = torch.empty(*ids.shape, x.shape[1], dtype=x.dtype, device=x.device)
        for u, expert in enumerate(dispatch.experts):
            block = blocks[expert]
            old.run_expert(x, layout.gate_up(block), layout.down(block), weights, dispatch, u, out)
        return old.combine(out, ids)

    def grouped(x, ids, weights, blocks, layout):
        dispatch = old.plan_dispatch(ids.cpu().numpy(), weights)
        out = torch.empty(ids.numel(), x.shape[1], dtype=x.dtype, device=x.device)
        for u, expert in enumerate(dispatch.experts):
            block = blocks[expert]
            old.run_expert(x, layout.gate_up(block), layout.down(block), dispatch, u, out)
        return old.combine_grouped(out, dispatch, ids)

    return grouped if hasattr(old, "combine_grouped") else scatter


def time_ms(run, inputs, repeats: int, device) -> float:
    run(*inputs)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(repeats):
        run(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - started) / repeats * 1e3


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--other", help="another engine/experts/kernel.py (scatter or session 9's grouped path) to "
                        "time side by side")
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--experts", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=256, help="2048 at the Qwen3-30B-A3B shape")
    parser.add_argument("--intermediate", type=int, default=128, help="768 at the Qwen3-30B-A3B shape")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.top_k > args.experts:
        parser.error("--top-k must not exceed --experts")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    layout = DenseLayout(args.hidden, args.intermediate, torch.bfloat16)
    blocks = torch.randn(args.experts, layout.numel, dtype=torch.bfloat16, device=device) / 8
    x = torch.randn(args.tokens, args.hidden, dtype=torch.bfloat16, device=device)
    ids = torch.stack([torch.randperm(args.experts)[: args.top_k] for _ in range(args.tokens)]).to(device)
    weights = torch.rand(args.tokens, args.top_k, dtype=torch.bfloat16, device=device)
    inputs = (x, ids, weights, blocks, layout)
    use_deterministic_kernels()  # as the engine runs
    def grouped(x, ids, weights, blocks, layout):  # this checkout's path
        return layout.run_blocks(x, ids, weights, blocks)

    paths = {"grouped": grouped}
    if args.other:
        paths["other"] = other_path(args.other)
    row = {"device": str(device), "tokens": args.tokens, "experts": args.experts}
    for name, run in paths.items():
        row[f"{name}_ms"] = round(time_ms(run, inputs, args.repeats, device), 2)
    if args.other:
        row["same_bits"] = torch.equal(paths["grouped"](*inputs), paths["other"](*inputs))
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
