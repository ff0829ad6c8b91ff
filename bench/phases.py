"""A phase-switching workload for the online MV-WSA controller: bursts of concurrent long-context requests
(KV-heavy) alternate with single short chats (expert-heavy), trace-driven on a synthetic model of a real
shape. A static split must either hold a burst's KV all the time (fewer expert slots for the chats) or run
the burst's requests as KV frees up; the online controller moves the bytes at barriers (engine.alloc.
online_controller). Arms, all at one budget: the offline configurator's split for the burst's concurrency
(`configured`), uniform static splits at several KV sizes (`static-kv-<GiB>`), and `online` (the
configured split, then the controller).

    python -m bench.phases --shape qwen3-30b-a3b --trace resources/traces/qwen3-twin_multi_turn.npz \\
        --budget 12 --burst 4x7000+64 --chat 2x256+128 --max-len 8192 --cycles 2 --out DIR

The default workload is one where the two phases want different splits: the burst's KV (2.6 GiB at 12 GiB) is
what keeps its four requests decoding together, and a quarter of the chats' expert slots. (On shorter bursts
the prefill dominates whatever the split, and every split measured within noise: 2026-11-29, session 6.)

Writes DIR/phases-<shape>-<budget>GiB.json: per arm and phase the wall time, decode tok/s, each request's TTFT,
the time spent at the online controller's barriers (its decisions and re-splits), preemptions, graph captures
and Triton compiles; per arm plan changes and peak memory, and whether its tokens equal the first arm's."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from bench.compile_log import TritonCompiles
from bench.phases_summary import summary, verdict
from engine.alloc.cost_model import LinkCost, link_at
from engine.alloc.memory_plan import GiB, MemoryPlan, kv_floor_bytes
from engine.bench.copy_rates import copy_loop_rate
from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.suite import attach_online, mvwsa_plan, peak_gib, pool_bytes, reset_peak, shape_plan, sync
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.bench.trace_router import TraceRouter
from engine.config import EngineOptions
from engine.system.hardware import device_name
from engine.model.sizes import model_sizes
from engine.requests import GenerateRequest
from engine.runtime.builder import assemble_engine
from engine.sampling import SamplingParams
from engine.traces.format import load as load_trace


def parse_phase(text: str) -> tuple[int, int, int]:
    """'4x3072+16' -> (requests, prompt tokens, generated tokens)."""
    try:
        count, rest = text.split("x")
        prompt, tokens = rest.split("+")
        values = int(count), int(prompt), int(tokens)
    except ValueError:
        values = (0,)
    if min(values) < 1 or len(values) != 3:
        raise argparse.ArgumentTypeError(f"'{text}' is not COUNTxPROMPT+TOKENS with positive numbers, e.g. 4x3072+16")
    return values


def kv_plan(weights, budget: int, kv_bytes: int, burst: int, max_len: int) -> MemoryPlan | None:
    """One expert cap for every layer and about kv_bytes of KV (None if fewer than top_k slots would remain)."""
    base = shape_plan(weights.args, "paged", budget, None, burst, max_len)
    row = base.num_moe_layers * base.expert_bytes
    slots = min(weights.args.num_experts, (pool_bytes(base) - kv_bytes) // row)
    if slots < weights.args.num_experts_per_tok:
        return None
    kv = pool_bytes(base) - slots * row
    return replace(base, layer_slots=(int(slots),) * base.num_moe_layers, kv_blocks=kv // base.kv_block_bytes)


def run_requests(engine, specs: list[tuple[str, list[int], int]], together: bool) -> list:
    """Run (id, prompt ids, tokens) requests: all at once (a burst) or one after another (chats)."""
    finishes = []
    for group in ([specs] if together else [[s] for s in specs]):
        for request_id, prompt, tokens in group:
            engine.add(GenerateRequest(prompt_token_ids=tuple(prompt), request_id=request_id,
                                       sampling=SamplingParams(max_tokens=tokens, ignore_eos=True)))
        while engine.has_work:
            finishes += [e for e in engine.step() if hasattr(e, "stats")]
    return finishes


def workload(args, vocab: int) -> list[tuple[str, bool, list]]:
    """(phase name, together, requests) for every phase of every cycle; the same prompts in every arm."""
    generator = torch.Generator().manual_seed(0)
    phases = []
    for cycle in range(args.cycles):
        for name, (count, prompt, tokens), together in (("burst", args.burst, True), ("chat", args.chat, False)):
            specs = [(f"{name}{cycle}-{i}", torch.randint(0, vocab, (prompt,), generator=generator).tolist(), tokens)
                     for i in range(count)]
            phases.append((f"{name}{cycle}", together, specs))
    return phases


def measure(weights, name: str, plan: MemoryPlan, args, device, router, online: bool) -> dict:
    reset_peak(device)
    burst = args.burst[0]
    options = EngineOptions(device=device.type, experts="paged", max_num_seqs=burst)
    engine = assemble_engine(weights, IdOnlyTokenizer(), options, plan, device, args.max_len)
    if online:
        attach_online(engine, weights, argparse.Namespace(max_len=args.max_len, batch=burst), device)
    router.drive(engine)
    # Warm-up at every batch size a phase may run (a static split too small for the whole burst runs it in
    # smaller batches), so no arm pays for compiling or capturing its kernels inside a measured phase.
    warm = [(f"warm-up-{i}", list(range(1 + i, 65 + i)), 4) for i in range(max(burst, 1))]
    for size in range(len(warm), 0, -1):
        run_requests(engine, warm[:size], together=True)
    engine.plan_changes, engine.plan_stall_s, engine.plan_reasons = 0, 0.0, []  # the measured phases' re-splits only
    engine.scheduler.block_manager.hash_to_block.clear()
    row = {"arm": name, "kv_gib": plan.kv_bytes / GiB, "slots_total": sum(plan.layer_slots), "phases": {},
           "tokens": []}
    graphs = engine.runner.padded_decode
    started = time.perf_counter()
    with TritonCompiles() as compiles:
        for phase, together, specs in workload(args, weights.args.vocab_size):
            sync(device)
            begin, compiled = time.perf_counter(), len(compiles.names)
            captured = graphs.capture_totals() if graphs is not None else (0, 0.0)
            barrier_s, kv_start = getattr(engine, "barrier_s", 0.0), engine.plan.kv_bytes / GiB
            decided = len(getattr(engine, "plan_reasons", []))
            finishes = sorted(run_requests(engine, specs, together), key=lambda f: f.request_id)
            sync(device)
            decode_s = sum(f.stats.total_s - f.stats.ttft_s for f in finishes)
            now = graphs.capture_totals() if graphs is not None else (0, 0.0)
            row["phases"][phase] = {
                "wall_s": time.perf_counter() - begin, "kv_gib_start": kv_start, "kv_gib": engine.plan.kv_bytes / GiB,
                "decode_tok_s": sum(len(f.token_ids) - 1 for f in finishes) / decode_s,
                "ttft_s": [f.stats.ttft_s for f in finishes],
                "barrier_s": getattr(engine, "barrier_s", 0.0) - barrier_s,
                "decisions": getattr(engine, "plan_reasons", [])[decided:],
                "preemptions": sum(f.stats.num_preemptions for f in finishes),
                "graph_captures": now[0] - captured[0], "capture_s": now[1] - captured[1],
                "triton_compiles": compiles.names[compiled:]}
            row["tokens"] += [list(f.token_ids) for f in finishes]
    row.update(total_s=time.perf_counter() - started, plan_changes=getattr(engine, "plan_changes", 0),
               plan_stall_s=getattr(engine, "plan_stall_s", 0.0),
               peak_gib=peak_gib(device), budget_gib=args.budget)
    engine.close()
    del engine
    print(json.dumps({k: v for k, v in row.items() if k != "tokens"}), flush=True)
    return row


def arms(weights, args, trace, link: LinkCost) -> list[tuple[str, MemoryPlan, bool]]:
    """(name, plan, online) for each arm in args.arms; the static arms at args.static_kv GiB of KV (default: none,
    half, all and 1.5x the burst's KV), each at least one request's KV floor."""
    budget = int(args.budget * GiB)
    burst, prompt, tokens = args.burst
    configured = mvwsa_plan(weights, budget, trace, link, burst, prompt + tokens)
    sizes = model_sizes(weights.args, 2)
    need = burst * (prompt + tokens) * sizes.kv_bytes_per_token  # the burst's KV
    one = kv_floor_bytes(sizes, 1, args.max_len)
    sizes_kv = [int(g * GiB) for g in args.static_kv] if args.static_kv else [one, need // 2, need, need * 3 // 2]
    statics = {}
    for kv in sizes_kv:
        plan = kv_plan(weights, budget, max(kv, one), burst, args.max_len)
        if plan is not None:
            statics.setdefault(f"static-kv-{plan.kv_bytes / GiB:.2f}", plan)
    chosen = [("configured", configured, False), ("online", configured, True)] + [
        (name, plan, False) for name, plan in statics.items()]
    kinds = [name.split("-")[0] for name, _, _ in chosen]  # static-kv-0.85 -> static
    picked = [(args.arms.index(kind), i) for i, kind in enumerate(kinds) if kind in args.arms]
    return [chosen[i] for _, i in sorted(picked)]  # in --arms order, the statics by KV


def parse_list(kind):
    def parse(text: str) -> list:
        try:
            return [kind(part) for part in text.split(",") if part]
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list") from None
    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.phases")
    add_shape_options(parser)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=12.0, help="GiB")
    parser.add_argument("--burst", type=parse_phase, default=parse_phase("4x7000+64"), help="COUNTxPROMPT+TOKENS")
    parser.add_argument("--chat", type=parse_phase, default=parse_phase("2x256+128"), help="COUNTxPROMPT+TOKENS")
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=8192)
    parser.add_argument("--arms", type=parse_list(str), default=["configured", "online", "static"],
                        help="of configured, online, static, run in this order (default: all)")
    parser.add_argument("--static-kv", type=parse_list(float), default=None,
                        help="GiB of KV of each static arm, at least one request's floor, e.g. 0.8,4.7 "
                             "(default: from the burst's KV)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    unknown = set(args.arms) - {"configured", "online", "static"}
    if unknown or not args.arms:
        parser.error(f"--arms takes configured, online and static, not {', '.join(sorted(unknown)) or 'nothing'}")
    device = torch.device(args.device)
    model_args = shape_of(args)
    weights = synthetic_weights(model_args, device, experts_on_host=True)
    trace = load_trace(args.trace)
    link = link_at(copy_loop_rate(weights.store, device))
    router = TraceRouter(trace, device)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"phases-{args.shape}-{args.budget:g}GiB.json"
    facts = {"shape": args.shape, "layers": model_args.num_hidden_layers, "trace": args.trace.name,
             "burst": args.burst, "chat": args.chat, "cycles": args.cycles, "max_len": args.max_len,
             "gpu": device_name(device)}
    chosen = arms(weights, args, trace, link)
    if not chosen:
        raise SystemExit(f"no arm to run: none of --arms {','.join(args.arms)} fits {args.budget:g} GiB "
                         f"(a static split needs top_k expert slots per layer beside its KV)")
    rows = []
    for name, plan, online in chosen:
        rows.append(measure(weights, name, plan, args, device, router, online))
        rows[-1]["same_tokens_as_first"] = rows[-1]["tokens"] == rows[0]["tokens"]
        print(f"{name}: same tokens as {rows[0]['arm']}: {rows[-1]['same_tokens_as_first']}", flush=True)
        path.write_text(json.dumps({"facts": facts, "rows": rows}))  # after every arm: a cut-off run keeps its rows
    result = summary(rows)
    if result is None:
        print(f"results: {path}")
        return
    path.write_text(json.dumps({"facts": facts, "rows": rows, "summary": result}))
    print(f"{verdict(result)}; results: {path}")


if __name__ == "__main__":
    main()
