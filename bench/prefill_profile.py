"""Where a resident prompt step's time and memory go, in one process on one set of synthetic weights (trace-driven
routing, as `wisp bench`):

1. `wisp bench` rows (engine.bench.suite on the weights built here): --arms and --budgets at each --prompts length,
   run first: once the torch profiler has run in a process, later launches are slower (bench/profile_decode.py);
2. the resident prompt step alone (the model runner's forward, synchronised before and after): its wall time at each
   length (median of --steps), at the engine's grouped tiles and at each --time-tiles configuration;
3. at each --tiles configuration ('default': the engine's, or e.g. 64,32,64,8,3): the prompt step's device memory
   above what the engine holds, torch's allocator against the driver's free memory (cudaMemGetInfo), whether a
   garbage collection frees it (cyclic garbage) or it stays, the grouped kernels' metadata (shared memory, stages,
   global scratch), the launch errors caught, and the largest blocks still alive after the step;
4. at each length: the host syncs of the step (CUDA's sync debug mode, by source line), the host's top functions
   (cProfile), then one step under the torch profiler: top kernels by GPU time, the kernel count, the GPU's busy
   time (union of kernels, copies and memsets) against the step's wall time, its longest idle gaps;
5. with --paged-budget: 2 (at each tile configuration) and 4 for the WiSP arm at that budget, at the first length;
   with --overlap too, instead: the WiSP prompt step with the lookahead off (0) and on (1) (engine.experts.pager.lookahead)
   and each length, the values interleaved step by step in one engine, with each step's expert copies.
With --overlap the suite's WiSP rows run once per value (the resident arm at the first), each into suite-overlapV/.

    python -m bench.prefill_profile --out DIR --prompts 512,2048 --tiles default --time-tiles "64,32,64,8,3"
    python -m bench.prefill_profile --out DIR --device cpu --layers 2 --prompts 64 --no-suite   # the CPU check
    python -m bench.prefill_profile --out DIR --prompts 512,2048 --overlap 0,1 --paged-budget 12 --no-profile

Writes DIR/profile.json (every row) and DIR/tables.txt (the profiler's and cProfile's tables)."""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import pstats
import shlex
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch

from engine.bench import suite
from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.bench.trace_router import TraceRouter
from engine.quant.grouped_gemm import sweep_tiles
from engine.config import EngineOptions
from engine.runtime.builder import assemble_engine
from engine.traces.format import load as load_trace

TRACE = Path("resources/traces/qwen3-published_chat-carry44.npz")
MiB = 2**20


class Report:
    """Rows to profile.json and text to tables.txt, both rewritten as they grow (a run cut short keeps them)."""

    def __init__(self, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        self.rows, self.json, self.text = [], out / "profile.json", out / "tables.txt"
        self.text.write_text("")

    def row(self, row: dict) -> None:
        print(json.dumps(row), flush=True)
        self.rows.append(row)
        self.json.write_text(json.dumps(self.rows, indent=1))

    def table(self, title: str, text: str) -> None:
        with self.text.open("a") as f:
            f.write(f"==== {title}\n{text}\n")


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class PromptSteps:
    """Runs the model runner's prompt steps through `hook` (the engine's own steps otherwise)."""

    def __init__(self, engine):
        self.engine, self.hook = engine, None
        forward = engine.runner.run

        def run(seqs, is_prefill):
            if not is_prefill or self.hook is None:
                return forward(seqs, is_prefill)
            return self.hook(lambda: forward(seqs, is_prefill))

        engine.runner.run = run

    def once(self, prompt: int, seed: int, hook) -> None:
        """One request of `prompt` random ids and one token; its prompt step runs inside hook(step)."""
        self.hook = hook
        try:
            self.engine.scheduler.block_manager.hash_to_block.clear()  # no prefix reuse
            suite.decode_once(self.engine, prompt, 1, 1, seed)
        finally:
            self.hook = None


def timed(device, times: list):
    def hook(step):
        sync(device)
        started = time.perf_counter()
        out = step()
        sync(device)
        times.append(time.perf_counter() - started)
        return out
    return hook


def sync_sources(device, counts: dict):
    """Counts CUDA's synchronising calls of the step by the Python line that made them (sync debug mode)."""
    def hook(step):
        if device.type != "cuda":
            return step()
        sync(device)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                out = step()
            finally:
                torch.cuda.set_sync_debug_mode(0)
        for w in caught:
            if "synchroniz" in str(w.message):
                where = f"{Path(w.filename).name}:{w.lineno}"
                counts[where] = counts.get(where, 0) + 1
        sync(device)
        return out
    return hook


def host_profile(device, holder: dict):
    def hook(step):
        sync(device)
        profile = cProfile.Profile()
        profile.enable()
        out = step()
        sync(device)
        profile.disable()
        holder["profile"] = profile
        return out
    return hook


def torch_profile(device, holder: dict):
    def hook(step):
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        sync(device)
        with torch.profiler.profile(activities=activities) as prof:
            with torch.profiler.record_function("prompt_step"):
                out = step()
                sync(device)
        holder["prof"] = prof
        return out
    return hook


def union_us(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


def trace_summary(prof, path: Path) -> dict:
    """The profiled step from its Chrome trace: wall time, GPU busy time, kernels, runtime calls, idle gaps."""
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    step = [e for e in events if e.get("name") == "prompt_step" and e.get("ph") == "X"]
    wall = max((e.get("dur", 0) for e in step), default=None)
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and "dur" in e]
    kernels = [e for e in gpu if e.get("cat") == "kernel"]
    runtime = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            entry = runtime.setdefault(e["name"], [0, 0.0])
            entry[0] += 1
            entry[1] += e.get("dur", 0)
    ordered = sorted(gpu, key=lambda e: e["ts"])
    gaps = []
    for before, after in zip(ordered, ordered[1:]):
        gap = after["ts"] - (before["ts"] + before["dur"])
        if gap > 0:
            gaps.append((gap, before["name"][:60], after["name"][:60]))
    gaps.sort(reverse=True)
    span = (ordered[-1]["ts"] + ordered[-1]["dur"] - ordered[0]["ts"]) if ordered else 0.0
    syncs = {name: v[0] for name, v in runtime.items() if "ynchronize" in name or name.startswith("cudaMemcpy")}
    return {"wall_us": wall, "gpu_busy_us": union_us([(e["ts"], e["ts"] + e["dur"]) for e in gpu]),
            "gpu_span_us": span, "kernels": len(kernels), "kernel_us": sum(e["dur"] for e in kernels),
            "copies": sum(1 for e in gpu if e.get("cat") != "kernel"),
            "gaps_over_20us": sum(1 for g in gaps if g[0] > 20),
            "idle_in_gaps_over_20us": sum(g[0] for g in gaps if g[0] > 20),
            "top_gaps": [[round(g, 1), a, b] for g, a, b in gaps[:12]], "sync_calls": syncs,
            "runtime_calls": {name: [v[0], round(v[1], 1)] for name, v in
                              sorted(runtime.items(), key=lambda kv: -kv[1][1])[:15]}}


def top_kernels(prof, limit: int = 25) -> list[dict]:
    rows = [{"name": e.key[:90], "count": e.count, "device_us": round(e.device_time_total, 1)}
            for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r["device_us"])[:limit]


def time_prompt(report: Report, steps: PromptSteps, device, prompt: int, repeats: int, tiles: str = "default") -> None:
    """The prompt step's wall time, synchronised before and after, median of `repeats` (after a compiling step)."""
    with sweep_tiles(None if tiles == "default" else tiles):
        steps.once(prompt, 9, None)
        times = []
        for seed in range(repeats):
            steps.once(prompt, 10 + seed, timed(device, times))
    report.row({"what": "prompt step", "tiles": tiles, "prompt": prompt, "step_s": sorted(times)[len(times) // 2],
                "step_s_runs": times})


def profile_prompt(report: Report, steps: PromptSteps, device, prompt: int, out: Path, label: str = "resident") -> None:
    """The step's host syncs by source line, the host's top functions, then one step under the torch profiler."""
    counts: dict = {}
    steps.once(prompt, 20, sync_sources(device, counts))
    report.row({"what": "host syncs", "arm": label, "prompt": prompt, "total": sum(counts.values()),
                "by_line": counts})
    holder: dict = {}
    steps.once(prompt, 21, host_profile(device, holder))
    text = io.StringIO()
    stats = pstats.Stats(holder["profile"], stream=text)
    stats.sort_stats("tottime").print_stats(30)
    stats.sort_stats("cumulative").print_stats(40)
    report.table(f"{label}: host functions of one {prompt}-token prompt step (cProfile)", text.getvalue())
    steps.once(prompt, 22, torch_profile(device, holder))
    prof = holder["prof"]
    sort = "device_time_total" if device.type == "cuda" else "self_cpu_time_total"
    report.table(f"{label}: one {prompt}-token prompt step (torch profiler)",
                 prof.key_averages().table(sort_by=sort, row_limit=45))
    report.table(f"{label}: one {prompt}-token prompt step, host ops by own time",
                 prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30))
    trace = out / f"trace-{label}-{prompt}.json"
    summary = trace_summary(prof, trace)
    trace.unlink()
    report.row({"what": "profiled step", "arm": label, "prompt": prompt, **summary, "top_kernels": top_kernels(prof)})


@contextmanager
def lookahead_rows(value: str | None):
    """Engines built inside stage large steps' next layer ("1"), or not ("0"); None: the engine's rule."""
    from unittest import mock

    from engine.experts.pager import host_pager, lookahead

    if value is None:
        yield
        return
    rows = (lambda expert_bytes, device_type: lookahead.gathered_rows(expert_bytes) if value == "1" else 0)
    with mock.patch.object(host_pager, "configured_rows", rows):
        yield


def tile_memory(report: Report, steps: PromptSteps, device, prompt: int, tiles: str) -> None:
    """The prompt step's device memory at another tile configuration: torch's peak and what stays after it, before
    and after a garbage collection, against the driver's view; the grouped launches' kernels and caught errors."""
    from triton.runtime.errors import OutOfResources

    from engine.quant import grouped_gemm

    caught, kernels = [], {}
    launch_both = grouped_gemm.launch_both

    def recorded(*args, **kwargs):
        launched = launch_both(*args, **kwargs)
        for k in launched:
            meta = k.metadata
            kernels[k.name] = {"shared": meta.shared, "num_stages": getattr(meta, "num_stages", None),
                               "global_scratch": getattr(meta, "global_scratch_size", None),
                               "registers": getattr(k, "n_regs", None), "spills": getattr(k, "n_spills", None)}
        return launched

    original_init = OutOfResources.__init__

    def counted(self, *args, **kwargs):
        caught.append(str(args)[:80])
        original_init(self, *args, **kwargs)

    with sweep_tiles(None if tiles == "default" else tiles):
        grouped_gemm.launch_both, OutOfResources.__init__ = recorded, counted
        try:
            steps.once(prompt, 30, None)  # compiles this configuration
            for label, collect in (("as is", False), ("gc disabled", None)):
                gc.collect()
                sync(device)
                caught.clear()
                held, free_before = torch.cuda.memory_allocated(device), torch.cuda.mem_get_info(device)[0]
                reserved_before = torch.cuda.memory_reserved(device)
                torch.cuda.reset_peak_memory_stats(device)
                if collect is None:
                    gc.disable()
                times = []
                try:
                    steps.once(prompt, 31, timed(device, times))
                    sync(device)
                    after = torch.cuda.memory_allocated(device)
                    objects = gc.collect()
                finally:
                    gc.enable()
                after_gc = torch.cuda.memory_allocated(device)
                row = {"what": "tile memory", "tiles": tiles, "prompt": prompt, "gc": label,
                       "step_s": times[0] if times else None,
                       "peak_over_held_mib": (torch.cuda.max_memory_allocated(device) - held) / MiB,
                       "left_after_step_mib": (after - held) / MiB, "left_after_gc_mib": (after_gc - held) / MiB,
                       "gc_objects": objects, "reserved_growth_mib": (torch.cuda.memory_reserved(device) -
                                                                       reserved_before) / MiB,
                       "driver_free_drop_mib": (free_before - torch.cuda.mem_get_info(device)[0]) / MiB,
                       "out_of_resources_caught": len(caught), "first_caught": caught[:2], "kernels": kernels}
                report.row(row)
            largest_blocks(report, steps, device, prompt)
        finally:
            grouped_gemm.launch_both, OutOfResources.__init__ = launch_both, original_init


def blocks(snapshot: dict):
    """(address, block) of every block of a memory snapshot's segments."""
    for segment in snapshot["segments"]:
        address = segment["address"]
        for block in segment["blocks"]:
            yield block.get("address", address), block
            address += block["size"]


def largest_blocks(report: Report, steps: PromptSteps, device, prompt: int) -> None:
    """With gc off, the largest allocations still alive after a prompt step and the Python lines that made them."""
    try:
        gc.collect()
        gc.disable()
        before = {address for address, b in blocks(torch.cuda.memory._snapshot()) if b["state"] == "active_allocated"}
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=200000)
        steps.once(prompt, 32, None)
        sync(device)
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        alive = [b for address, b in blocks(snapshot) if b["state"] == "active_allocated" and address not in before]
        alive.sort(key=lambda b: -b["size"])
        rows = []
        for b in alive[:8]:
            frames = [f"{Path(f['filename']).name}:{f['line']} {f['name']}" for f in b.get("frames", [])
                      if f["filename"].endswith(".py")][:6]
            rows.append({"mib": round(b["size"] / MiB, 2), "frames": frames})
        report.row({"what": "blocks alive after the step (gc off)", "prompt": prompt, "count": len(alive),
                    "total_mib": sum(b["size"] for b in alive) / MiB, "largest": rows})
    except Exception as err:  # noqa: BLE001 - a diagnostic: the run goes on
        report.row({"what": "blocks alive after the step (gc off)", "error": f"{type(err).__name__}: {err}"})
    finally:
        gc.enable()
        gc.collect()


def wisp_engine(args, host, device):
    """An engine on the WiSP arm's split at --paged-budget GiB (the suite's MV-WSA plan), routed by the trace."""
    from engine.alloc.cost_model import link_at
    from engine.alloc.memory_plan import GiB
    from engine.bench.copy_rates import copy_loop_rate

    trace = load_trace(args.trace)
    link = link_at(copy_loop_rate(host.store, device))
    plan = suite.mvwsa_plan(host, int(args.paged_budget * GiB), trace, link, 1, args.max_len)
    engine = assemble_engine(host, IdOnlyTokenizer(), EngineOptions(device=device.type, experts=plan.mode), plan,
                             device, args.max_len)
    TraceRouter(trace, device).drive(engine)
    return engine


def paged_profile(args, host, device, report: Report, prompt: int) -> None:
    """The WiSP arm's prompt step at --paged-budget GiB (the suite's configured split): its wall time at the
    engine's tiles and at each --time-tiles configuration, then its syncs, host functions and one profiled step, as
    the resident step's."""
    steps = PromptSteps(wisp_engine(args, host, device))
    for tiles in ["default"] + list(filter(None, args.time_tiles.split(";"))):  # a same-machine A/B of the tiles
        with sweep_tiles(None if tiles == "default" else tiles):
            steps.once(prompt, 0, None)
            times = []
            for seed in range(args.steps):
                steps.once(prompt, 10 + seed, timed(device, times))
        report.row({"what": "prompt step", "arm": f"wisp {args.paged_budget:g} GiB", "tiles": tiles,
                    "prompt": prompt, "step_s": sorted(times)[len(times) // 2], "step_s_runs": times})
    profile_prompt(report, steps, device, prompt, args.out, label="wisp")
    steps.engine.close()


def overlap_ab(args, host, device, report: Report, prompts: list[int]) -> None:
    """The WiSP arm's prompt step at --paged-budget GiB at each --overlap value, interleaved step by step in one
    engine (same machine, same slots), at each length: wall time (synchronised before and after) and the step's
    expert traffic (bytes copied, the copy stream's busy time, staged experts and those used)."""
    from engine.experts.pager import lookahead

    engine = wisp_engine(args, host, device)
    steps, pager = PromptSteps(engine), engine.runner.experts
    values = args.overlap.split(",")

    def set_overlap(value: str) -> None:
        pager.host_pager.lookahead.rows = lookahead.gathered_rows(host.store.expert_bytes) if value == "1" else 0

    for prompt in prompts:
        rows = {value: [] for value in values}
        for value in values:  # compiles, fills the ring's ranking
            set_overlap(value)
            steps.once(prompt, 0, None)
        for seed in range(args.steps):
            for value in values:
                set_overlap(value)
                times, before = [], pager.counters.snapshot()
                steps.once(prompt, 10 + seed, timed(device, times))
                pager.synchronize()
                after = pager.counters
                rows[value].append({"step_s": times[0], "h2d_gb": (after.h2d_bytes - before.h2d_bytes) / 1e9,
                                    "copy_s": after.copy_s - before.copy_s,
                                    "staged": after.prefetched - before.prefetched,
                                    "staged_used": after.prefetch_used - before.prefetch_used})
        for value in values:
            runs = rows[value]
            median = sorted(runs, key=lambda r: r["step_s"])[len(runs) // 2]
            report.row({"what": "wisp prompt step", "arm": f"wisp {args.paged_budget:g} GiB", "overlap": value,
                        "prompt": prompt, "ring_rows": lookahead.gathered_rows(host.store.expert_bytes)
                        if value == "1" else 0, **median, "runs": runs})
    set_overlap(values[0])
    engine.close()
    del engine, steps, pager
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def suite_rows(args, host, device, out: Path, report: Report, started: float) -> None:
    """`wisp bench` at each prompt length on the weights built here, as engine.bench.suite.main runs its sessions."""
    argv = ["--shape", args.shape, "--trace", str(args.trace), "--budgets", args.budgets, "--arms", args.arms,
            "--tokens", str(args.tokens), "--runs", str(args.runs), "--max-len", str(args.max_len),
            "--out", str(out / "suite"), "--device", device.type]
    if args.layers:
        argv += ["--layers", str(args.layers)]
    if args.quant:
        argv += ["--quant", args.quant]
    base = suite.parse_args(argv)
    facts = suite.run_facts(base, host.args, host, device, 0.0)
    values = args.overlap.split(",") if args.overlap else [None]
    others = ",".join(a for a in args.arms.split(",") if a != "resident")
    for prompt in args.prompts.split(","):
        for i, value in enumerate(values):
            arms = args.arms if i == 0 else others
            if time.perf_counter() - started > args.suite_deadline:
                report.row({"what": "suite", "prompt": int(prompt), "overlap": value,
                            "skipped": "past --suite-deadline"})
                continue
            if not arms:
                continue
            folder = "suite" if value is None else f"suite-overlap{value}"
            session = suite.parse_args(argv + shlex.split(f"--prompt {prompt} --arms {arms} --out {out / folder}"))
            with lookahead_rows(value):
                suite.run_session(session, host, device, {**facts, "trace": session.trace.name})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.prefill_profile", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_shape_options(parser)
    parser.add_argument("--quant", default="Q4_K_M", help="'': bf16 experts")
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--prompts", default="512,2048")
    parser.add_argument("--steps", type=int, default=3, help="timed prompt steps per length (median)")
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--suite", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--arms", default="resident,wisp")
    parser.add_argument("--budgets", default="12")
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--suite-deadline", type=float, default=150.0,
                        help="seconds after the start past which no further suite session begins")
    parser.add_argument("--tiles", default="",
                        help="tile configurations (;-separated, 'default': the engine's) to measure the prompt "
                             "step's memory at")
    parser.add_argument("--time-tiles", default="",
                        help="other tile configurations (;-separated) to time the prompt step at")
    parser.add_argument("--paged-budget", type=float, default=0.0,
                        help="GiB: last, profile the WiSP arm's prompt step at the first --prompts length")
    parser.add_argument("--overlap", default="",
                        help="lookahead values (0: off, 1: on, e.g. 0,1): the suite's WiSP rows at each, and with "
                             "--paged-budget the WiSP prompt step at each, interleaved")
    parser.add_argument("--profile", action=argparse.BooleanOptionalAction, default=True,
                        help="the resident prompt step's timings, memory and profiles (and the WiSP step's profile)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    device = torch.device(args.device if torch.cuda.is_available() else "cpu")
    report = Report(args.out)
    host = synthetic_weights(shape_of(args), device, experts_on_host=True, quant=args.quant or None)
    report.row({"what": "built", "s": time.perf_counter() - started, "device": str(device), "torch": torch.__version__})
    prompts = [int(p) for p in args.prompts.split(",")]
    if args.overlap and args.paged_budget:  # first: the same-engine A/B does not depend on the suite's time left
        overlap_ab(args, host, device, report, prompts)
    if args.suite:
        suite_rows(args, host, device, args.out, report, started)
    if args.profile:
        resident_profile(args, host, device, report, prompts)
    if args.paged_budget and not args.overlap:
        if device.type == "cuda":
            torch.cuda.empty_cache()
        paged_profile(args, host, device, report, prompts[0])
    report.row({"what": "done", "s": time.perf_counter() - started})


def resident_profile(args, host, device, report: Report, prompts: list[int]) -> None:
    """Sections 2-4: the resident prompt step's timings, memory and profiles."""
    resident = suite.resident_weights(host, device) if device.type == "cuda" else host
    plan = suite.plan_for(resident, "resident", None, None, 1, args.max_len)
    engine = assemble_engine(resident, IdOnlyTokenizer(), EngineOptions(device=device.type), plan, device,
                             args.max_len)
    TraceRouter(load_trace(args.trace), device).drive(engine)
    steps = PromptSteps(engine)
    for tiles in ["default"] + list(filter(None, args.time_tiles.split(";"))):  # timings before any profiler
        for prompt in prompts:
            time_prompt(report, steps, device, prompt, args.steps, tiles)
    for tiles in filter(None, args.tiles.split(";")) if device.type == "cuda" else ():
        for prompt in prompts:
            tile_memory(report, steps, device, prompt, tiles)
    for prompt in prompts:
        profile_prompt(report, steps, device, prompt, args.out)
    engine.close()
    del engine, steps, resident
    gc.collect()


if __name__ == "__main__":
    main()
