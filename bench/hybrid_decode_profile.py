"""One resident decode step of a hybrid shape (synthetic experts, random routing), on the padded path (CUDA graphs on
CUDA) and on the dynamic path: wall ms per step of each, then torch profiler tables of one step of each (top ops
by device time and by host time, op count). The layer count is cut (--layers) so the build is quick; per-layer
costs are what the tables show.

    python bench/hybrid_decode_profile.py --shape qwen3.5-35b-a3b --layers 8 --quant Q4_K_M --out DIR

Every path is timed before the first profiler table is made (bench.profile_decode says why). Runs on the CPU too
(eager padded step, no graphs): a check that the script works, not a measurement."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from engine.api import GenerateRequest, SamplingParams
from engine.bench.suite import plan_for, sync
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.config import EngineOptions
from engine.model.shapes import shape
from engine.runtime.builder import assemble_engine


def decoding_engine(weights, device, decode: str, prompt: int, max_len: int):
    """An engine with one request past its prefill and a few decode steps (graphs captured)."""
    plan = plan_for(weights, "resident", None, None, batch=1, max_len=max_len)
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device=device.type, experts="resident",
                                                                       max_num_seqs=1, decode=decode),
                             plan, device, max_len)
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, weights.args.vocab_size, (prompt,), generator=generator).tolist()
    engine.add(GenerateRequest(prompt_token_ids=tuple(ids), request_id=decode,
                               sampling=SamplingParams(max_tokens=max_len - prompt - 1, ignore_eos=True)))
    while engine.scheduler.waiting:
        engine.step()
    for _ in range(3):
        engine.step()
    sync(device)
    return engine


def step_ms(engine, device, steps: int) -> float:
    started = time.perf_counter()
    for _ in range(steps):
        engine.step()
    sync(device)
    return (time.perf_counter() - started) / steps * 1e3


def profile_table(engine, device) -> str:
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        engine.step()
        sync(device)
    events = prof.key_averages()
    ops = sum(e.count for e in events if e.key.startswith("aten::"))
    kernels = sum(e.count for e in events if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    lines = [f"aten ops {ops}, device kernels {kernels}"]
    if device.type == "cuda":
        lines += ["top 15 by device time", events.table(sort_by="self_cuda_time_total", row_limit=15)]
    lines += ["top 15 by host time", events.table(sort_by="self_cpu_time_total", row_limit=15)]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="qwen3.5-35b-a3b")
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--quant", default="Q4_K_M")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    weights = synthetic_weights(shape(args.shape, num_layers=args.layers), device, experts_on_host=False,
                                quant=args.quant)
    max_len = args.prompt + 64
    engines = {path: decoding_engine(weights, device, path, args.prompt, max_len) for path in ("static", "dynamic")}
    timings = {path: step_ms(engine, device, args.steps) for path, engine in engines.items()}
    summary = {"shape": args.shape, "layers": args.layers, "quant": args.quant, "device": str(device),
               "step_ms": timings, "step_ms_per_layer": {k: v / args.layers for k, v in timings.items()}}
    print(json.dumps(summary), flush=True)
    (args.out / "profile.json").write_text(json.dumps(summary, indent=1))
    with open(args.out / "profile.txt", "w") as file:
        for path, engine in engines.items():
            table = profile_table(engine, device)
            file.write(f"== {path} decode step ({args.layers} layers)\n{table}\n")
            print(f"== {path}: {table.splitlines()[0]}", flush=True)
    for engine in engines.values():
        engine.close()


if __name__ == "__main__":
    main()
