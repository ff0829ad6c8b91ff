"""Where a decode step's time goes, per arm: the engine's decode tok/s, the GPU time of one step (its CUDA graphs
replayed back to back), the host time around it (the difference), the launch time of the step's graphs, then the
host's top functions in the decode steps (cProfile) and the GPU's top kernels (torch profiler). Trace-driven routing on a synthetic
model of a real shape, as `wisp bench`.

    python -m bench.profile_decode --shape qwen3-30b-a3b --trace resources/traces/qwen3-twin_code.npz \\
        --arms resident,paged-all --tokens 64

--gemv wide,word times every arm once with each quantized decode GEMV (engine.quant.linear.GEMV) on the same weights;
--fused-step 0,1 times (and tables) every arm without and with the decode step's fused kernels (fused_step).
--overlap 0,1 times every arm without and with overlapped decode steps (LLMEngine.overlap: the next step launched on the
device's sampled tokens before the host reads them, engine.runtime.llm_engine); the tables run the last.
--merge-qkv 0,1 times (and tables) every arm with an attention's quantized q, k, v projections in three layers and
merged where they can share one (merge_qkv, engine.quant.merged_projections): the dense weights are built again
for each, from the same seed, so the same values.

resident: every expert on the device; paged-all: the pager with a slot for every expert, all warm (the pager's
own cost, no misses); wisp: the pager at --budget GiB with the configured split. --chunk-layers 48,8 runs every
arm with a whole decode step as one graph (the engine's default), then split into graphs of 8 layers: on the H200
(bench/results/2026-11-29-grouped-prefill) six graphs took 0.93-0.96 ms more GPU time per step than one.

Every arm is timed before the first profiler table is made: once the torch profiler has run in a process,
every later graph launch is slow. On the H200 (bench/results/2026-11-29-online-vs-static) the resident step's one
graph launched in 28-49 us with no profiler run yet and in 1590 us after one; the paged step's six graphs in
38 us and 1316 us. Timed after the resident arm's tables, the paged arm had looked slow to launch (session 7).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import importlib.util
import json
import pstats
from functools import partial
from pathlib import Path

import torch

from bench.phases import parse_list
from engine.system import triton_support
from engine.alloc.cost_model import link_at
from engine.alloc.memory_plan import GiB
from engine.bench.copy_rates import copy_loop_rate
from engine.bench.graph_timing import replay_ms, replay_whole, timed_launches, whole_step_graphs
from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.suite import decode_once, mvwsa_plan, plan_for, resident_weights, sync
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.bench.trace_router import TraceRouter
from engine.config import EngineOptions
from engine.runtime.builder import assemble_engine
from engine.runtime.decode_graphs import WholeStepOptions
from engine.quant import linear
from engine.traces.format import load as load_trace

OVERLAP: int | None = None  # --overlap's value for the engines built from here on (None: the engine's rule)


def engine_for(weights, plan, args, router, warm_all: bool, chunk_layers: int | None = None):
    """An engine on these weights, its decode graphs captured (one short request run first); chunk_layers:
    layers per graph of a whole decode step (None: one graph per step)."""
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda", experts=plan.mode), plan,
                             torch.device("cuda"), args.max_len)
    engine.runner.padded_decode.set_whole_options(WholeStepOptions(chunk_layers=chunk_layers))
    if OVERLAP is not None:
        engine.overlap = bool(OVERLAP)
    if warm_all:
        engine.runner.experts.warm({layer: list(range(weights.args.num_experts)) for layer in weights.store.blocks})
    router.drive(engine)
    decode_once(engine, args.prompt, 8, 1, seed=1000)  # warm-up: captures the decode graph
    return engine


def time_arm(name: str, weights, plan, args, router, warm_all: bool, chunk_layers: int | None = None) -> dict:
    """The arm's decode tok/s, GPU time per step, host time around it and launch time (no profiler attached)."""
    engine = engine_for(weights, plan, args, router, warm_all, chunk_layers)
    finishes = decode_once(engine, args.prompt, args.tokens, 1, seed=0)
    stats = finishes[0].stats
    tok_s = (args.tokens - 1) / (stats.total_s - stats.ttft_s)
    static = whole_step_graphs(engine)
    gpu_ms = replay_ms(static) if static is not None else None
    launch = timed_launches(lambda: replay_whole(static)) if static is not None else None
    step_ms = 1e3 / tok_s
    graphs = len(static.whole) if static is not None else None
    row = {"arm": name, "chunk_layers": chunk_layers, "graphs": graphs, "decode_tok_s": tok_s,
           "steps_ahead": engine.steps_ahead,
           "step_ms": step_ms, "graph_replay_ms": gpu_ms,
           "host_ms": step_ms - gpu_ms if gpu_ms is not None else None, "launch_us": launch}
    print(json.dumps(row), flush=True)
    return row


def print_tables(name: str, weights, plan, args, router, warm_all: bool) -> None:
    """The host's top functions (cProfile) and the GPU's top kernels (torch profiler) of one request."""
    engine = engine_for(weights, plan, args, router, warm_all)
    host = cProfile.Profile()
    decode_once(engine, args.prompt, args.tokens, 1, seed=1, on_prefilled=host.enable)  # the decode steps only
    host.disable()
    text = io.StringIO()
    pstats.Stats(host, stream=text).sort_stats("tottime").print_stats(25)
    pstats.Stats(host, stream=text).sort_stats("cumulative").print_stats(45)
    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
    decode_once(engine, args.prompt, args.tokens, 1, seed=2, on_prefilled=prof.start)  # the decode steps only
    sync(torch.device("cuda"))
    prof.stop()
    print(f"==== {name}: host functions by own and by cumulative time (the decode steps of one request: "
          f"{args.tokens - 1} steps; the host's waits for the GPU show in `tolist`)")
    print(text.getvalue())
    print(f"==== {name}: GPU kernels (the decode steps of one request: {args.tokens - 1} steps)")
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=40), flush=True)
    kernels = kernel_counts(prof)
    steps = args.tokens - 1
    print(json.dumps({"arm": name, "prompt": args.prompt, "decode_steps": steps,
                      "launches_per_step": sum(k["count"] for k in kernels) / steps,
                      "kernel_us_per_step": sum(k["device_us"] for k in kernels) / steps, "kernels": kernels}),
          flush=True)


def kernel_counts(prof) -> list[dict]:
    """Every GPU kernel of the profiled request: name, launches and total device microseconds (for per-layer and
    per-step counts: divide by tokens and layers)."""
    rows = [{"name": e.key, "count": e.count, "device_us": e.device_time_total}
            for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda row: -row["device_us"])


class Arms:
    """Each arm's weights and plan, made when the arm runs (the resident arm's device copy is freed after)."""

    def __init__(self, host, args, trace, device):
        self.host, self.args, self.trace, self.device = host, args, trace, device

    def run(self, arm: str, what) -> object:
        try:
            return self._run(arm, what)
        finally:  # the arm's provider holds reference cycles (ring -> bound method): collect them, so the arm's
            gc.collect()  # device memory is free now
            torch.cuda.empty_cache()

    def _run(self, arm: str, what) -> object:
        host, args, device = self.host, self.args, self.device
        if arm == "resident":
            resident = resident_weights(host, device)
            return what(arm, resident, plan_for(resident, "resident", None, None, 1, args.max_len), warm_all=False)
        if arm == "paged-all":
            return what(arm, host, plan_for(host, "paged", None, host.args.num_experts, 1, args.max_len), warm_all=True)
        link = link_at(copy_loop_rate(host.store, device))
        return what(arm, host, mvwsa_plan(host, int(args.budget * GiB), self.trace, link, 1, args.max_len),
                    warm_all=False)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_decode")
    add_shape_options(parser, device=False)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--arms", default="resident,paged-all",
                        help="of resident, paged-all, wisp, timed in this order (an arm named twice runs twice)")
    parser.add_argument("--budget", type=float, default=12.0, help="GiB, for the wisp arm")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--quant", default=None, choices=["Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0", "MXFP4_MOE"],
                        help="experts as a GGUF file of this type holds them (random valid blocks), as `wisp bench`")
    parser.add_argument("--chunk-layers", type=parse_list(int), default=None,
                        help="layers per graph of a whole decode step (default: the engine's, one graph per step); "
                             "several (e.g. 8,48) run each arm at each")
    parser.add_argument("--gemv", type=parse_list(str), default=None,
                        help="time every arm with each of these quantized decode GEMVs (engine.quant.linear.GEMV: "
                             "wide, word, byte); the tables run the first")
    parser.add_argument("--fused-step", type=parse_list(int), default=None,
                        help="time and table every arm with the fused step at each of these (0: the decode step's "
                             "op-by-op kernels, 1: its fused ones; engine.system.triton_support.fused_step)")
    parser.add_argument("--merge-qkv", type=parse_list(int), default=None,
                        help="time and table every arm with merge_qkv at each of these (0: q, k, v in three "
                             "quantized layers, 1: merged where they can share one); the dense weights built for each")
    parser.add_argument("--overlap", type=parse_list(int), default=None,
                        help="time every arm with overlap at each of these (0: each decode step waits for "
                             "the host to read the last one's tokens, 1: the next is launched first)")
    parser.add_argument("--tables", action=argparse.BooleanOptionalAction, default=True,
                        help="after all the timings, print each arm's cProfile and torch profiler tables")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the rows as JSON to this file, or to profile_decode.json in this folder")
    args = parser.parse_args(argv)
    arms = args.arms.split(",")
    unknown = [arm for arm in arms if arm not in ("resident", "paged-all", "wisp")]
    if unknown or min(args.chunk_layers or [1]) < 1:
        parser.error(f"unknown arm {', '.join(unknown)}: use resident, paged-all or wisp" if unknown
                     else "--chunk-layers takes positive layer counts, e.g. 8,48")
    if args.out is not None:  # checked before the run: its timings are written after minutes of work
        args.out = rows_path(args.out)
        if not args.out.parent.is_dir():
            parser.error(f"--out: no folder {args.out.parent} to write {args.out.name} in")
    if not torch.cuda.is_available():
        parser.error("profiling a decode step needs a CUDA GPU (its graphs and kernels); none is visible here")
    device = torch.device("cuda")
    host = synthetic_weights(shape_of(args), device, experts_on_host=True, quant=args.quant)
    trace = load_trace(args.trace)
    router = TraceRouter(trace, device)
    arms_of = Arms(host, args, trace, device)
    rows = []
    fused_values = args.fused_step or [None]
    merge_values = args.merge_qkv or [None]
    # every timing before the first profiler table (see the module's docstring)
    for merge in merge_values:
        rebuild_dense(host, merge, args, device)
        for fused in fused_values:
            set_fused_step(fused)  # read when a step is traced: the graphs captured from here on use it
            for gemv in args.gemv or [linear.GEMV]:
                linear.GEMV = gemv  # read at each GEMV call: the graphs captured from here on run this kernel
                for chunk, overlap in [(c, o) for c in args.chunk_layers or [None] for o in args.overlap or [None]]:
                    if overlap is not None:
                        set_overlap(overlap)
                    for arm in arms:
                        row = arms_of.run(arm, partial(time_arm, args=args, router=router, chunk_layers=chunk))
                        rows.append(dict(row, gemv=gemv, fused_step=fused, merge_qkv=merge, overlap=overlap))
                        print(json.dumps({"gemv": gemv, "fused_step": fused, "merge_qkv": merge,
                                          "overlap": overlap}), flush=True)
                    if args.out is not None:  # before the tables: a run cut short keeps its timings
                        args.out.write_text(json.dumps(rows))
    linear.GEMV = (args.gemv or [linear.GEMV])[0]
    if args.tables:
        for merge in merge_values:
            rebuild_dense(host, merge, args, device)
            for fused in fused_values:
                set_fused_step(fused)
                for arm in dict.fromkeys(arms):
                    print(json.dumps({"tables": arm, "fused_step": fused, "merge_qkv": merge}), flush=True)
                    arms_of.run(arm, partial(print_tables, args=args, router=router))


def rebuild_dense(host, merge: int | None, args, device: torch.device) -> None:
    """(merge given) host's dense weights built again with merge_qkv=merge, from the same seed."""
    if merge is None:
        return
    from engine.bench.synthetic import synthetic_dense_weights

    host.model = None  # the previous dense weights go before the next are made
    gc.collect()
    torch.cuda.empty_cache()
    host.model, host.dense_bytes = synthetic_dense_weights(host.args, host.dtype, device, args.quant,
                                                           merge_qkv=bool(merge))


def set_overlap(value: int) -> None:
    """Overlapped decode steps off (0) or on (1) for the engines engine_for builds from here on."""
    global OVERLAP
    OVERLAP = value


def set_fused_step(value: int | None) -> None:
    """The decode step's fused kernels off (0) or on where Triton is (1) for the steps traced from here on (None: the
    engine's rule): engine.system.triton_support.fused_step reads HAS_TRITON."""
    if value is not None:
        triton_support.HAS_TRITON = bool(value) and importlib.util.find_spec("triton") is not None


def rows_path(out: Path) -> Path:
    """--out names the JSON file, or a folder to write profile_decode.json in."""
    return out / "profile_decode.json" if out.is_dir() else out


if __name__ == "__main__":
    main()
