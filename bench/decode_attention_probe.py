"""Decode attention alone (engine.model.decode_attention) on the Qwen3-30B-A3B shape's heads: GPU microseconds of
one call at several context lengths and chunk sizes, the KV bytes it reads and their time at the measured copy
rate. Shows how the kernel's time grows with the context (issue: +0.8 ms per 1k positions over 48 layers).

    python -m bench.decode_attention_probe --lengths 512,2048,8192 --chunks 64,128,256,512 --max-len 8704
"""

from __future__ import annotations

import argparse
import json

import torch

import engine.model.decode_attention as decode_attention_module
from bench.phases import parse_list


def time_us(fn, repeats: int = 200) -> float:
    """The mean of `repeats` calls captured in one CUDA graph (as the engine runs them), in microseconds."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(repeats):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / repeats


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.decode_attention_probe")
    parser.add_argument("--lengths", type=parse_list(int), default=[512, 2048, 8192])
    parser.add_argument("--chunks", type=parse_list(int), default=[256])
    parser.add_argument("--max-len", type=int, default=8704)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=16, help="KV block size: slots are scattered by block")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    slots = args.batch * args.max_len
    k = torch.randn(slots, args.kv_heads, args.head_dim, dtype=torch.bfloat16, device=device)
    v = torch.randn_like(k)
    q = torch.randn(args.batch, args.heads, args.head_dim, dtype=torch.bfloat16, device=device)
    blocks = torch.randperm(slots // args.block_size, device=device)  # a pool's blocks in a shuffled order
    index = (blocks[:, None] * args.block_size + torch.arange(args.block_size, device=device)).reshape(args.batch, -1)
    for chunk in args.chunks:
        decode_attention_module.CHUNK = chunk
        for length in args.lengths:
            lengths = torch.full((args.batch,), length, dtype=torch.int64, device=device)
            us = time_us(lambda: decode_attention_module.decode_attention(q, k, v, index, lengths, 0.088))
            kv_bytes = 2 * args.batch * length * args.kv_heads * args.head_dim * 2
            print(json.dumps({"chunk": chunk, "length": length, "max_len": args.max_len, "us": round(us, 2),
                              "kv_mb": kv_bytes / 1e6, "gb_s": round(kv_bytes / us / 1e3, 1)}), flush=True)


if __name__ == "__main__":
    main()
