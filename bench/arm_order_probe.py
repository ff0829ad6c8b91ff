"""Does an arm's decode speed depend on what ran before it in the process? Runs `wisp bench` arms (suite.run_arm,
the suite's own measurement) in the order given, on one set of synthetic weights, and prints each one's decode
tok/s and the GPU time of its step (step_gpu_ms). Consecutive resident arms share one device copy of the experts,
freed before the next other arm, as in the suite.

    python bench/arm_order_probe.py --trace resources/traces/qwen3-twin_code.npz \
        --sequence paged-all,rates,resident,resident-sdpa-attention,paged-all

An arm may name its own prompt length, ARM@TOKENS (e.g. resident@2048; --prompt otherwise), so the same arm at two
context lengths can be compared at the same place in the capture order (docs/bench.md, "Rows of one process").

Steps: resident and its suite variants (resident-nondeterministic, resident-sdpa-attention, ...), paged-all
(every expert in a warm slot), rates (the suite's copy-rate measurements, run_facts), graphs48/graphs8 (layers
per decode graph from here on), toggle (torch's deterministic algorithms off, then on again, with nothing run
between), recaptures (one resident engine drops its decode graphs and captures them again, six times, as a
re-plan does; recaptures-keep holds on to the dropped graphs), profile (a resident request under the torch
profiler: its kernels' GPU time; run it last, as it slows later graph launches). --keep-cache: no empty_cache.

On the H200 (bench/results/2026-11-30-graph-capture-order) every arm's step ran 8.53-8.79 ms of GPU time while its
graph was among the process's first three captures, and ~0.9 ms more from the fourth capture on.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.profile_decode import engine_for  # noqa: E402
from engine.bench.copy_rates import copy_kernel_rates, copy_loop_rate  # noqa: E402
from engine.bench.graph_timing import replay_ms, whole_step_graphs  # noqa: E402
from engine.bench.shapes import add_shape_options, shape_of  # noqa: E402
from engine.bench.suite import (RESIDENT_VARIANTS, decode_once, plan_for, reset_peak, resident_weights,  # noqa: E402
                                run_arm)
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights  # noqa: E402
from engine.bench.trace_router import TraceRouter  # noqa: E402
from engine.config import EngineOptions  # noqa: E402
from engine.runtime.builder import assemble_engine  # noqa: E402
from engine.runtime.decode_graphs import WholeStepOptions  # noqa: E402
from engine.runtime.determinism import use_deterministic_kernels  # noqa: E402
from engine.traces.format import load as load_trace  # noqa: E402

RESIDENT_OPTIONS = {"resident": {}, **RESIDENT_VARIANTS}  # arm: its EngineOptions
ON_RESIDENT = {*RESIDENT_OPTIONS, "recaptures", "recaptures-keep", "profile"}  # steps on the device copy
ARMS = {*RESIDENT_OPTIONS, "paged-all"}  # the steps that measure an arm (and may name its prompt length)


def main() -> None:
    parser = argparse.ArgumentParser()
    add_shape_options(parser)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--sequence", required=True)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep-cache", action="store_true",
                        help="never return cached device memory to the driver between arms (no empty_cache)")
    args = parser.parse_args()
    sequence, prompts = split_prompts(parser, args.sequence.split(","), args)  # before the weights take minutes
    known = {*ON_RESIDENT, "paged-all", "rates", "toggle"}
    unknown = [step for step in sequence if step not in known and not re.fullmatch(r"graphs[1-9][0-9]*", step)]
    if unknown:
        parser.error(f"unknown step {', '.join(unknown)}: use {', '.join(sorted(known))} or graphsN")
    if args.device == "cpu" and {"recaptures", "recaptures-keep", "profile"} & set(sequence):
        parser.error("recaptures and profile time CUDA graphs and kernels: run them with --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA GPU is visible here: run on one, or pass --device cpu (no step_gpu_ms there)")
    if args.keep_cache:
        torch.cuda.empty_cache = lambda: None
    args.batch, args.link_gbps = 1, None  # what run_arm reads of the suite's options
    device = torch.device(args.device)
    host = synthetic_weights(shape_of(args), device, experts_on_host=True)
    router = TraceRouter(load_trace(args.trace), device)
    resident, rows, whole = None, [], None
    for place, step in enumerate(sequence):
        if step not in ON_RESIDENT:
            resident = None  # the suite frees the resident copy before its other arms
            reset_peak(device)
        elif resident is None:
            resident = resident_weights(host, device)
        if step == "rates":
            rows.append({"step": step, "copy_loop_gb_s": copy_loop_rate(host.store, device),
                         "copy_kernel_gb_s": copy_kernel_rates(host.store, device)})
        elif step == "toggle":
            use_deterministic_kernels(False)
            use_deterministic_kernels(True)
            rows.append({"step": step})
        elif step in ("recaptures", "recaptures-keep"):
            rows.append({"step": step, "step_gpu_ms": recaptures(resident, args, device, router,
                                                                 keep=step.endswith("keep"))})
        elif step == "profile":
            rows.append({"step": step, "kernels": kernel_times(resident, args, device, router)})
        elif step.startswith("graphs"):
            whole = WholeStepOptions(chunk_layers=int(step[len("graphs"):]))  # for the arms that follow
            rows.append({"step": step})
        elif step in RESIDENT_OPTIONS:
            plan = plan_for(resident, "resident", None, None, 1, args.max_len)
            rows.append(run_arm(resident, step, plan, with_prompt(args, prompts[place]), device, router, args.tokens,
                                whole=whole, **RESIDENT_OPTIONS[step]))
        else:  # paged-all
            plan = plan_for(host, "paged", None, host.args.num_experts, 1, args.max_len)
            rows.append(run_arm(host, step, plan, with_prompt(args, prompts[place]), device, router, args.tokens,
                                warm_all=True, whole=whole))
        row = rows[-1]
        summary = {key: row.get(key) for key in ("step", "arm", "prompt", "cuda_graphs_before", "decode_tok_s",
                                                 "step_gpu_ms", "peak_gib", "error")}
        print("ORDER", place, json.dumps({k: v for k, v in summary.items() if v is not None}), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps([{k: v for k, v in r.items() if k not in ("tokens", "logprobs")}
                                        for r in rows]))


def split_prompts(parser, steps: list[str], args) -> tuple[list[str], list[int]]:
    """ARM@TOKENS steps -> (the steps' names, each one's prompt length: TOKENS, else --prompt); a length on a step
    that is not an arm, not a positive number, or leaving no room for --tokens within --max-len is refused."""
    names, prompts = [], []
    for step in steps:
        name, _, tokens = step.partition("@")
        if tokens and name not in ARMS:
            parser.error(f"step {step}: only an arm ({', '.join(sorted(ARMS))}) takes a prompt length")
        prompt = int(tokens) if tokens.isdigit() else args.prompt if not tokens else -1
        if not 0 < prompt <= args.max_len - args.tokens:
            parser.error(f"step {step}: the prompt length after @ must be 1 to {args.max_len - args.tokens} "
                         f"(--max-len {args.max_len} less --tokens {args.tokens})")
        names.append(name)
        prompts.append(prompt)
    return names, prompts


def with_prompt(args, prompt: int) -> argparse.Namespace:
    return argparse.Namespace(**{**vars(args), "prompt": prompt})


def recaptures(weights, args, device, router, times: int = 6, keep: bool = False) -> list[float]:
    """One resident engine whose decode graphs are dropped and captured again, as a re-plan does: the GPU ms of
    its step after each capture (the engine's first: no warm-up request before the loop). keep: hold on to the
    dropped graphs (they are not destroyed)."""
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device=device.type, experts="resident"),
                             plan_for(weights, "resident", None, None, 1, args.max_len), device, args.max_len)
    router.drive(engine)
    gpu_ms, kept = [], []
    for _ in range(times):
        if keep:
            kept += list(engine.runner.padded_decode.by_batch.values())
        engine.runner.padded_decode.invalidate()
        decode_once(engine, args.prompt, 8, 1, seed=1000)  # captures the decode graph again
        gpu_ms.append(replay_ms(whole_step_graphs(engine)))
        print("RECAPTURE", gpu_ms[-1], flush=True)
    engine.close()
    return gpu_ms


def kernel_times(weights, args, device, router) -> list[dict]:
    """GPU time per kernel name over one resident request (its prefill and its decode)."""
    engine = engine_for(weights, plan_for(weights, "resident", None, None, 1, args.max_len), args, router, False)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        decode_once(engine, args.prompt, args.tokens, 1, seed=2)
    table = sorted(prof.key_averages(), key=lambda e: -e.device_time_total)[:30]
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=30), flush=True)
    engine.close()
    return [{"name": e.key, "count": e.count, "device_us": e.device_time_total} for e in table]


if __name__ == "__main__":
    main()
