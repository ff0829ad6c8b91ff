"""One gpt-oss-20b attention layer's prompt (64 query heads, 8 KV heads, head size 64, bf16) on CUDA: the torch
formula (engine.model.sink_attention.eager_attention) against the flash kernel (engine.model.sink_flash), with
sinks, on a full and on a sliding (128) layer; median of REPEATS timed calls after one warm-up, in ms.
  python bench/sink_flash_timing.py [OUT_JSON]"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from engine.model.sink_attention import eager_attention
from engine.model.sink_flash import sink_flash_attention

H, KVH, HD = 64, 8, 64
PROMPTS = (512, 2048, 8192)
WINDOWS = (None, 128)
REPEATS = 5


def median_ms(fn) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEATS):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def row(prompt: int, window: int | None) -> dict:
    generator = torch.Generator(device="cuda").manual_seed(prompt)
    q = torch.randn(prompt, H, HD, generator=generator, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(prompt, KVH, HD, generator=generator, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(prompt, KVH, HD, generator=generator, device="cuda", dtype=torch.bfloat16)
    sinks = torch.randn(H, generator=generator, device="cuda", dtype=torch.bfloat16)
    args = (q, k, v, HD**-0.5, sinks, window)
    eager, flash = median_ms(lambda: eager_attention(*args)), median_ms(lambda: sink_flash_attention(*args))
    error = (eager_attention(*args).float() - sink_flash_attention(*args).float()).abs().max().item()
    return dict(prompt=prompt, window=window, eager_ms=eager, flash_ms=flash, max_abs_diff=error)


def main() -> None:
    rows = [row(prompt, window) for window in WINDOWS for prompt in PROMPTS]
    print(f"{'prompt':>7} {'window':>6} {'eager ms':>9} {'flash ms':>9} {'speedup':>8} {'max |diff|':>10}")
    for r in rows:
        print(f"{r['prompt']:>7} {str(r['window']):>6} {r['eager_ms']:>9.2f} {r['flash_ms']:>9.3f} "
              f"{r['eager_ms'] / r['flash_ms']:>7.1f}x {r['max_abs_diff']:>10.2e}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(dict(device=torch.cuda.get_device_name(), rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
