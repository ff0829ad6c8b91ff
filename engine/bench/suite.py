"""`wisp bench`: trace-driven decode/TTFT of every expert arm at each budget on a synthetic model of a real
shape (docs/design.md). One process builds the weights once (dense on the GPU, experts in pinned host
memory) and runs every arm on them; each arm gets exactly its planned device memory.

    wisp bench --shape qwen3-30b-a3b --trace resources/traces/qwen3-twin_code.npz --budgets 12,24,32 --out DIR
    python -m bench.report DIR/qwen3-30b-a3b-b1-p512.json   # results.md + PNG plots

Arm wisp-sweep measures uniform slot caps at several expert shares of the pool, so the configured split
(arm wisp) can be checked against the best measured one. bench/h200_suite.sh runs the whole suite on the H200.
"""

from __future__ import annotations

import argparse
import gc
import json
import shlex
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from engine.alloc.cost_model import LinkCost, link_at
from engine.alloc.memory_plan import GiB, MemoryPlan, ModelSizes, PlanRequest, kv_floor_bytes, plan_memory
from engine.alloc.mvwsa import PoolSpec, configure
from engine.bench.copy_rates import copy_kernel_rates, copy_loop_rate
from engine.bench.draft_layer import attach_random_drafter, is_planned, planned_sizes, with_planned_draft_layer
from engine.bench.graph_timing import step_gpu_ms
from engine.bench.image_prompts import (TOWERS, BenchImageError, ImagePrompts, image_prompts, image_speed, parse_size,
                                        tower_facts, tower_plan_bytes)
from engine.bench.shapes import add_shape_options, shape_of
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.bench.trace_router import TraceRouter
from engine.bench.verify_warm_up import warm_verify_rows
from engine.config import EngineOptions
from engine.errors import BudgetError
from engine.experts.pager.link_pace import LinkPace
from engine.experts.formats.store import ExpertStore
from engine.experts.providers.touched_copy import TouchedCopyExperts
from engine.system.hardware import device_name
from engine.model.args import ModelArgs
from engine.model.loader import LoadedWeights
from engine.model.sizes import model_sizes
from engine.quant.file_types import FILE_TYPES
from engine.requests import GenerateRequest
from engine.runtime.builder import assemble_engine
from engine.runtime.decode_graphs import WholeStepOptions, process_graph_captures
from engine.sampling import SamplingParams
from engine.traces.format import load as load_trace
from engine.traces.profile import routing_profile


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / GiB if device.type == "cuda" else None


SWEEP_SHARES = (0.3, 0.5, 0.7, 0.85, 1.0)  # of the pool to expert slots; 1.0 = the most the KV floor leaves


def plan_for(weights: LoadedWeights, mode: str, budget: int | None, slots: int | None, batch: int, max_len: int,
             draft_tokens: int = 0):
    return shape_plan(weights.args, mode, budget, slots, batch, max_len, weights.store.expert_bytes,
                      weights.dense_bytes, draft_tokens)


def planned_drafts(args) -> int:
    """--draft-tokens where the arms draft (--speculative), else 0: the plans hold a hybrid's verify steps' scratch
    state rows for them as the engine's own plan does (EngineOptions.planned_draft_tokens)."""
    return EngineOptions(draft_tokens=getattr(args, "draft_tokens", 8),
                         speculative=getattr(args, "speculative", "off")).planned_draft_tokens


def bench_sizes(model_args: ModelArgs, expert_bytes: int | None = None, dense_bytes: int | None = None) -> ModelSizes:
    """The shape's sizes with bf16 dense weights and KV; experts at expert_bytes (a quantized store's slot row), the
    dense weights at dense_bytes where given (quantized ones: LoadedWeights.dense_bytes); a vision tower in
    model_args.extra (--image) counts in the dense bytes either way, and so does a draft layer there
    (--speculative mtp: engine.bench.draft_layer), with its KV layer."""
    sizes = model_sizes(model_args, 2)
    if expert_bytes is not None:
        sizes = replace(sizes, expert_bytes=expert_bytes)
    if dense_bytes is not None:
        sizes = replace(sizes, dense_bytes=dense_bytes + tower_plan_bytes(model_args))  # --image's tower (or nothing)
    return planned_sizes(sizes, model_args)


def shape_plan(model_args: ModelArgs, mode: str, budget: int | None, slots: int | None, batch: int, max_len: int,
               expert_bytes: int | None = None, dense_bytes: int | None = None, draft_tokens: int = 0):
    """The workspace is planned for max_len tokens per step, the scheduler's limit (engine.runtime.builder), as the
    engine's own builder plans it; max_len x batch reserved a workspace no step used (~7 GiB of 24 for 8 x 8192)."""
    request = PlanRequest(mode=mode, budget_bytes=budget, block_size=16, max_model_len=max_len, max_num_seqs=batch,
                          max_batched_tokens=max_len, expert_slots=slots, draft_tokens=draft_tokens)
    return plan_memory(bench_sizes(model_args, expert_bytes, dense_bytes), request)


def pool_bytes(plan: MemoryPlan) -> int:
    """P = budget - dense - workspace (- linear-attention state): what a paged plan splits between expert slots and
    KV."""
    return plan.budget_bytes - plan.dense_bytes - plan.workspace_bytes - plan.state_bytes


def expert_share(plan: MemoryPlan) -> float | None:
    """The fraction of the pool a paged plan gives to expert slots (None without a budget or paging)."""
    if plan.mode != "paged" or plan.budget_bytes is None:
        return None
    return plan.expert_device_bytes / pool_bytes(plan)


def mvwsa_plan(weights, budget, trace, link: LinkCost, batch, max_len, draft_tokens: int = 0) -> MemoryPlan:
    """The offline configurator's split for this budget and trace (per-layer slots, KV at its floor)."""
    base = plan_for(weights, "paged", budget, None, batch, max_len, draft_tokens)
    sizes = bench_sizes(weights.args, weights.store.expert_bytes, weights.dense_bytes)
    pool = pool_bytes(base)
    spec = PoolSpec(pool, sizes.expert_bytes, kv_floor_bytes(sizes, batch, max_len))
    profile = routing_profile(trace).first_layers(weights.args.num_moe_layers)  # --layers cuts the model
    chosen = configure(profile, link, spec)["configured"]
    return replace(base, layer_slots=chosen.layer_slots,
                   kv_blocks=chosen.kv_bytes // base.kv_block_bytes)


def share_plan(model_args: ModelArgs, budget: int, share: float, batch: int, max_len: int,
               expert_bytes: int | None = None, dense_bytes: int | None = None) -> MemoryPlan:
    """About `share` of the pool to expert slots with one cap per layer, the rest to KV. The cap is at least
    top_k and at most what leaves the KV floor (the default paged plan's cap), so share=1.0 gives that most."""
    base = shape_plan(model_args, "paged", budget, None, batch, max_len, expert_bytes, dense_bytes)
    row_bytes = base.num_moe_layers * base.expert_bytes  # one slot in every MoE layer
    wanted = int(share * pool_bytes(base)) // row_bytes
    slots = min(base.min_layer_slots, max(model_args.num_experts_per_tok, wanted))
    kv = pool_bytes(base) - slots * row_bytes
    return replace(base, layer_slots=(int(slots),) * base.num_moe_layers, kv_blocks=kv // base.kv_block_bytes)


def fifty_fifty_plan(weights, budget, batch, max_len) -> MemoryPlan:
    """Half of the expert+KV pool to expert slots (one cap per layer), half to KV: the paper's fixed split."""
    return share_plan(weights.args, budget, 0.5, batch, max_len, weights.store.expert_bytes, weights.dense_bytes)


def sweep_plans(model_args: ModelArgs, budget: int, batch: int, max_len: int,
                expert_bytes: int | None = None, dense_bytes: int | None = None) -> list[MemoryPlan]:
    """Uniform-cap plans at each of SWEEP_SHARES, fewest slots first; shares that give the same cap run once."""
    by_slots: dict[int, MemoryPlan] = {}
    for share in SWEEP_SHARES:
        plan = share_plan(model_args, budget, share, batch, max_len, expert_bytes, dense_bytes)
        by_slots.setdefault(plan.min_layer_slots, plan)
    return [by_slots[slots] for slots in sorted(by_slots)]


class TextPrompts:
    """Requests of random prompt ids (engine.bench.image_prompts.ImagePrompts puts an image before them)."""

    tokenizer = IdOnlyTokenizer()

    def add(self, engine, request_id: str, index: int, generator: torch.Generator, prompt: int, tokens: int) -> None:
        ids = torch.randint(0, engine.runner.model.args.vocab_size, (prompt,), generator=generator).tolist()
        engine.add(GenerateRequest(prompt_token_ids=tuple(ids), request_id=request_id,
                                   sampling=SamplingParams(max_tokens=tokens, ignore_eos=True)))

    def attach(self, engine) -> None:
        pass

    def take(self) -> dict:
        return {}


def prompts_of(args) -> "TextPrompts | ImagePrompts":
    """The session's requests (main sets args.prompts; other callers of the arms get text prompts)."""
    return getattr(args, "prompts", None) or TextPrompts()


def decode_once(engine, prompt: int, tokens: int, batch: int, seed: int, on_prefilled=None, prompts=None) -> list:
    """batch requests of prompt random ids (TextPrompts, or prompts'), run to their end; on_prefilled() runs once,
    after the step that leaves no request waiting for its prefill."""
    generator = torch.Generator().manual_seed(seed)
    prompts = prompts or TextPrompts()
    for i in range(batch):
        prompts.add(engine, f"s{seed}-{i}", i, generator, prompt, tokens)
    finishes = []
    while engine.has_work:
        finishes += [e for e in engine.step() if hasattr(e, "stats")]
        if on_prefilled is not None and not engine.scheduler.waiting:
            on_prefilled()
            on_prefilled = None
    sync(engine.device)
    return finishes


def measure(engine, provider, args, tokens: int) -> dict:
    prompts = prompts_of(args)
    decode_once(engine, args.prompt, 4, args.batch, seed=1000, prompts=prompts)  # warm-up
    warm_verify_rows(engine, lambda tokens: decode_once(engine, args.prompt, tokens, args.batch, seed=1001,
                                                         prompts=prompts), engine.max_draft_tokens)
    prompts.take()
    runs = []
    for run in range(args.runs):
        engine.scheduler.block_manager.hash_to_block.clear()  # no prefix reuse between runs
        before, prefilled = provider.counters.snapshot(), []
        finishes = decode_once(engine, args.prompt, tokens, args.batch, seed=run,
                               on_prefilled=lambda: prefilled.append(provider.counters.snapshot()), prompts=prompts)
        provider.synchronize()
        after = provider.counters
        decode_s = max(f.stats.total_s - f.stats.ttft_s for f in finishes)
        runs.append({"decode_tok_s": args.batch * (tokens - 1) / decode_s, "ttft_s": max(f.stats.ttft_s for f in finishes),
                     "hits": after.hits - before.hits, "misses": after.misses - before.misses,
                     "h2d_bytes": after.h2d_bytes - before.h2d_bytes, "copy_s": after.copy_s - before.copy_s,
                     # after every prefill: what the decode floor counts (report's decode / floor)
                     "decode_misses": after.misses - prefilled[0].misses,
                     "decode_hits": after.hits - prefilled[0].hits,
                     "decode_h2d_bytes": after.h2d_bytes - prefilled[0].h2d_bytes,
                     "timed_bytes": after.timed_bytes - before.timed_bytes,
                     "tokens": [list(f.token_ids) for f in finishes], "logprobs": [list(f.logprobs) for f in finishes],
                     **prompts.take()})
    middle = sorted(runs, key=lambda r: r["decode_tok_s"])[len(runs) // 2]
    # Tokens and logprobs of the first run (same prompts in every arm): the report checks them against resident.
    speed = prefill_speed(runs, args)
    if isinstance(prompts, ImagePrompts):
        speed.update(image_speed(runs, prompts.facts(args.prompt), args.batch))
    return {**middle, "tokens": runs[0]["tokens"], "logprobs": runs[0]["logprobs"],
            "decode_tok_s_runs": [r["decode_tok_s"] for r in runs], **speed}


def prefill_speed(runs: list[dict], args) -> dict:
    """TTFT's median over the runs (each run's own, beside the decode median's row) and the prefill rate it gives:
    every prompt token of the batch over the time to the first token."""
    ttfts = sorted(r["ttft_s"] for r in runs)
    median = ttfts[len(ttfts) // 2]
    return {"ttft_s_runs": [r["ttft_s"] for r in runs], "ttft_s_median": median,
            "prefill_tok_s": args.batch * args.prompt / median}


def failed_row(arm: str, budget: int | None, err: Exception) -> dict:
    """A benchmark row of an arm that could not run, with its error; the suite goes on."""
    row = {"arm": arm, "budget_gib": budget / GiB if budget else None, "expert_share": None,
           "error": f"{type(err).__name__}: {err}"}
    print(json.dumps(row), flush=True)
    return row


def run_arm(weights, arm: str, plan: MemoryPlan, args, device, router, tokens: int, provider=None,
            runs: int | None = None, warm_all: bool = False, online: bool = False, host_pager: bool = False,
            whole: WholeStepOptions | None = None, **options):
    """One arm; options go to EngineOptions (prefetch, decode, deterministic, attention), whole to its decode
    graphs. A failure is recorded as a row with its error, and the suite goes on."""
    try:
        return measure_arm(weights, arm, plan, args, device, router, tokens, provider, runs, warm_all, online,
                           host_pager, whole, options)
    except Exception as err:  # noqa: BLE001 - a benchmark row, not a user path
        row = {"arm": arm, "budget_gib": plan.budget_bytes / GiB if plan.budget_bytes else None,
               "expert_share": expert_share(plan), "error": f"{type(err).__name__}: {err}"}
        print(json.dumps(row), flush=True)
        return row


def measure_arm(weights, arm, plan, args, device, router, tokens, provider, runs, warm_all, online, host_pager,
                whole, options: dict):
    reset_peak(device)
    graphs_before = process_graph_captures()  # from 3 on, this arm's decode graph replays at the later, slower rate
    provider = provider() if provider is not None else None  # built after the reset: its memory counts
    options = {"decode": getattr(args, "decode", "auto"), **options}  # an arm's own decode path (resident-dynamic) wins
    # the speculative mode and draft tokens size the verify steps (static row counts, a hybrid's scratch states)
    engine_options = EngineOptions(device=device.type, experts=plan.mode, max_num_seqs=args.batch,
                                   draft_tokens=getattr(args, "draft_tokens", 8),
                                   speculative=getattr(args, "speculative", "off"), **options)
    prompts = prompts_of(args)
    engine = assemble_engine(weights, prompts.tokenizer, engine_options, plan, device, args.max_len, provider=provider)
    prompts.attach(engine)
    provider = engine.runner.experts
    if args.link_gbps and hasattr(provider, "pace_link"):  # resident mode copies nothing
        provider.pace_link(LinkPace(args.link_gbps, device))
    if whole is not None and engine.runner.padded_decode is not None:
        engine.runner.padded_decode.set_whole_options(whole)
    if host_pager:  # the per-layer host pager (what prefetch runs on), not the device pager in one graph
        provider.page_on_host()
    if warm_all:
        provider.warm({layer: list(range(weights.args.num_experts)) for layer in weights.store.blocks})
    if online:  # the online MV-WSA controller re-splits at the drained barrier after every request
        attach_online(engine, weights, args, device)
    router.drive(engine)
    spec_facts = attach_speculation(engine, args, weights, device)
    result = measure(engine, provider, argparse.Namespace(**{**vars(args), "runs": runs or args.runs}), tokens)
    result["plan_changes"] = engine.plan_changes if online else 0
    if isinstance(prompts, ImagePrompts):  # a prompt with images decodes with M-RoPE offsets
        padded = engine.runner.padded_decode
        result["decode_path"] = "static shapes" if padded is not None and args.batch in padded.by_batch else "dynamic"
    if engine.speculation is not None:  # measured over every run: the drafts replayed and the union's misses
        counters = engine.speculation.counters
        result.update(spec_proposed=counters.num_proposed, spec_accepted=counters.num_accepted,
                      verify_steps=counters.num_verify_steps, verify_misses=counters.verify_misses)
        result.update(drafting_facts(engine.speculation.drafter))
    if device.type == "cuda":  # last: it replays the step (see step_gpu_ms)
        result["step_gpu_ms"] = step_gpu_ms(engine, args.batch)
    # expert_share is that of the plan the arm starts with (wisp-online may re-split it: plan_changes).
    row = {"arm": arm, "budget_gib": plan.budget_bytes / GiB if plan.budget_bytes else None, "batch": args.batch,
           "prompt": args.prompt, "num_tokens": tokens, "mode": plan.mode, "expert_share": expert_share(plan),
           "slots_per_layer_min": plan.min_layer_slots, "slots_total": sum(plan.layer_slots),
           "offloaded_layers": plan.offloaded_layers, "kv_gib": plan.kv_bytes / GiB, "plan_gib": plan.total_bytes / GiB,
           "peak_gib": peak_gib(device), "cuda_graphs_before": graphs_before, **spec_facts, **result}
    engine.close()
    del engine
    print(json.dumps({k: v for k, v in row.items() if k not in ("tokens", "logprobs")}), flush=True)
    return row


def attach_speculation(engine, args, weights: LoadedWeights, device: torch.device) -> dict:
    """--speculative: drafts verified k+1 positions a step, accepted at the stated rate (random weights accept
    nothing of their own) -> the row's fields that say what it assumes. mtp on weights whose plan counts a draft
    layer (run_session: with_planned_draft_layer): that layer, with random weights, runs at every proposal, so its
    time is in the steps and in the draft-length rule's drafting cost; the drafts verified are still the replay's."""
    mode = getattr(args, "speculative", "off")
    if mode == "off":
        return {}
    from engine.generation.speculative.replay import AcceptanceReplay, ReplayedDrafter
    from engine.runtime.speculation import Speculation

    replay, vocab_size, drafter, facts = AcceptanceReplay(args.accept_rate), weights.args.vocab_size, None, {}
    if mode == "mtp":
        graphs = getattr(args, "draft_layer", "run") == "graphs"
        drafter = ReplayedDrafter(attach_random_drafter(engine, weights, device, graphs), replay, vocab_size) \
            if is_planned(weights.args) else None
        run = "mtp layer run, later drafts graphed" if graphs else "mtp layer run"
        facts["drafter"] = (f"{run} (random {str(weights.dtype).replace('torch.', '')} weights, acceptance "
                            "replayed)" if drafter is not None else "none: the draft layer's cost is left out")
    engine.speculation = Speculation(engine.max_draft_tokens, replay, vocab_size, drafter=drafter)
    engine.drafts_by_default = True
    return {"speculative": mode, "assumed_accept_rate": args.accept_rate, "draft_tokens_max": engine.max_draft_tokens,
            **facts}


def drafting_facts(drafter) -> dict:
    """A row's drafting cost where the draft layer ran: its drafts and their seconds over every run, warm-up too."""
    if drafter is None:
        return {}
    return {"drafts_run": drafter.num_drafted, "drafting_s": drafter.drafting_s,
            "drafting_ms_per_draft": 1e3 * drafter.drafting_s / max(1, drafter.num_drafted)}


def session_weights(host: LoadedWeights, args) -> LoadedWeights:
    """host as a session's arms plan it: with the shape's draft layer counted for --speculative mtp (unless
    --draft-layer skip), as the engine's builder counts a checkpoint's."""
    if getattr(args, "speculative", "off") != "mtp" or getattr(args, "draft_layer", "run") == "skip":
        return host
    return with_planned_draft_layer(host)


def attach_online(engine, weights, args, device) -> None:
    """Attach the controller as the engine builder does, and count the re-plans it makes and their stall."""
    from engine.runtime.builder import attach_controller

    request = PlanRequest(mode="paged", budget_bytes=engine.plan.budget_bytes, block_size=16, max_model_len=args.max_len,
                          max_num_seqs=args.batch, max_batched_tokens=args.max_len)
    attach_controller(engine, bench_sizes(weights.args, weights.store.expert_bytes, weights.dense_bytes), request, device,
                      weights.args.num_hidden_layers)
    engine.controller.min_steps = 8
    engine.plan_changes, engine.plan_stall_s, engine.barrier_s, engine.plan_reasons = 0, 0.0, 0.0, []
    step = engine.step

    def count(barrier) -> None:  # barrier_s: all of a barrier's time (the controller's work and any re-split)
        started = time.perf_counter()
        applied = [e for e in barrier() if e.error is None]
        engine.barrier_s += time.perf_counter() - started
        engine.plan_changes += len(applied)
        engine.plan_stall_s += sum(e.stall_s for e in applied)
        engine.plan_reasons += [e.reason for e in applied]

    def step_then_barrier():  # as the app's engine thread does (engine.api)
        count(engine.admission_barrier)
        events = step()
        if not engine.has_work:
            count(engine.at_barrier)
        return events

    engine.step = step_then_barrier


def resident_weights(host: LoadedWeights, device) -> LoadedWeights:
    store = ExpertStore(host.store.layout, list(host.store.blocks), host.args.num_experts, device)
    for layer, block in host.store.blocks.items():
        store.blocks[layer].copy_(block)
    return LoadedWeights(host.args, host.model, store, host.dtype, host.dense_bytes)


def git_commit() -> str | None:
    """The short commit of the checkout this code runs from; None outside a git checkout (the H200's copy)."""
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).resolve().parent,
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def rate(text: str) -> float:
    """An argparse type: a fraction 0..1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"an acceptance rate is 0 to 1, got {text}")
    return value


def image_size(text: str) -> tuple[int, int]:
    """An argparse type: WIDTHxHEIGHT."""
    try:
        return parse_size(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wisp bench")
    add_shape_options(parser)
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--budgets", default="12,24,32")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sweep-runs", type=int, default=1, help="runs per wisp-sweep point (median)")
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--arms", default="resident,resident-dynamic,paged-all,wisp,wisp-online,wisp-prefetch,"
                                          "static-uva,static-copy",
                        help="also: resident-nondeterministic (without deterministic kernels), resident-sdpa-attention "
                             "and wisp-sdpa-attention (SDPA decode, not engine.model.decode_attention), "
                             "resident-nondeterministic-sdpa (both), wisp-uniform (one cap "
                             "per layer), wisp-50-50 (half the pool to experts), "
                             f"wisp-sweep (one cap per layer at {', '.join(map(str, SWEEP_SHARES))} of the pool)")
    parser.add_argument("--also", action="append", default=[],
                        help="another session on the same built weights, e.g. --also '--batch 4 --budgets 24' "
                             "(its flags override the others; repeatable)")
    parser.add_argument("--quant", default=None, choices=list(FILE_TYPES),
                        help="weights as a GGUF file of this type holds them (random valid blocks): the experts, and the "
                             "dense tensors in the types llama.cpp's quantizer gives them (--dense-weights)")
    parser.add_argument("--dense-weights", default="file", choices=["file", "dtype"],
                        help="--quant or --gguf: dense tensors in the file's quant types (file) or bf16 (dtype)")
    parser.add_argument("--gguf", type=Path, default=None,
                        help="run on this GGUF file's weights (its shape and expert types; --shape, --layers and "
                             "--quant are not used), e.g. the file llama.cpp is measured on")
    parser.add_argument("--decode", default="auto", choices=("auto", "graphs", "static", "dynamic"),
                        help="every arm's decode path, as `wisp run --decode` (the resident-dynamic arm keeps its own)")
    parser.add_argument("--link-gbps", type=float, default=None,
                        help="pace host->device expert copies to this many GB/s (25: PCIe4 x16, 12: PCIe3 x16); the "
                             "floors and the planner use it. It cannot show a desktop GPU's memory bandwidth or the "
                             "host's DDR speed (engine.experts.pager.link_pace)")
    parser.add_argument("--speculative", default="off", choices=("off", "ngram", "mtp"),
                        help="verify drafts k+1 positions a step; on random weights the drafts are accepted at "
                             "--accept-rate (rows say they assume it)")
    parser.add_argument("--accept-rate", type=rate, default=0.6,
                        help="with --speculative: the acceptance each draft is given (0..1)")
    parser.add_argument("--draft-tokens", type=int, default=8, help="with --speculative: most drafts a step")
    parser.add_argument("--draft-layer", default="run", choices=("run", "graphs", "skip"),
                        help="with --speculative mtp on a shape whose family has a draft layer: run it (random "
                             "weights, planned as a checkpoint's) at every proposal for its cost, eagerly as the "
                             "engine does (run) or its drafts after the first as CUDA graph replays (graphs: "
                             "engine.generation.speculative.draft_graphs, not yet the engine's path), or skip it (rows "
                             "without the drafter's cost)")
    parser.add_argument("--image", type=image_size, default=None, metavar="WxH",
                        help="each request: one random-pixel PNG of this size (decoded and preprocessed as a user's "
                             "image), then --prompt text tokens, seen by a random-weight --tower that the plans count; "
                             "rows add the tower's time and share of TTFT (engine.bench.image_prompts)")
    parser.add_argument("--tower", default="qwen3.5-35b-a3b", choices=sorted(TOWERS),
                        help="with --image: the vision tower's published shape (tiny: CPU tests)")
    parser.add_argument("--label", default="", help="free text stored in the JSON facts (e.g. what changed)")
    parser.add_argument("--out", type=Path, required=True)
    return parser.parse_args(argv)


def run_facts(args, model_args: ModelArgs, host: LoadedWeights, device, build_s: float) -> dict:
    """What every row shares; num_moe_layers x num_experts x expert_bytes is what a cold prompt copies (TTFT floor)."""
    measured = copy_loop_rate(host.store, device)
    return {"shape": args.shape, "layers": model_args.num_hidden_layers, "trace": args.trace.name,
            "gpu": device_name(device), "torch": torch.__version__,
            "git_commit": git_commit(), "label": args.label, "build_s": build_s, "quant": args.quant,
            **dense_facts(host),
            "gguf": args.gguf.name if args.gguf else None,
            "num_moe_layers": model_args.num_moe_layers, "num_experts": model_args.num_experts,
            "expert_bytes": host.store.expert_bytes, "pinned": host.store.is_pinned,
            **link_facts(args, measured),
            "copy_kernel_gb_s": guarded(copy_kernel_rates, host.store, device)}


def link_facts(args, measured: float) -> dict:
    """The link the floors and the planner use: the paced one where --link-gbps is slower than the measured."""
    paced = min(measured, args.link_gbps) if args.link_gbps else measured
    return {"link_gbps": args.link_gbps, "copy_loop_gb_s_measured": measured, "copy_loop_gb_s": paced}


def guarded(fn, *args):
    """fn(*args), or the error as text: one failed measurement must not stop the suite."""
    try:
        return fn(*args)
    except Exception as err:  # noqa: BLE001 - recorded in the results
        return {"error": f"{type(err).__name__}: {err}"}


def unbudgeted_rows(host, arms, args, device, router) -> list[dict]:
    """resident, then paged-all, then resident's variants: on the H200 every whole-step decode graph captured
    after a process's third ran ~0.9 ms slower per step (bench/results/2026-11-30-graph-capture-order), so the pager's
    own cost (paged-all against resident) is measured by the process's first two engines."""
    rows = []
    if "resident" in arms:
        rows += resident_rows(host, ["resident"], args, device, router)
    if "paged-all" in arms:
        plan = plan_for(host, "paged", None, host.args.num_experts, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "paged-all-resident", plan, args, device, router, args.tokens, warm_all=True))
    if "resident" in arms:
        rows += resident_rows(host, [arm for arm in RESIDENT_VARIANTS if arm in arms], args, device, router)
    return rows


RESIDENT_VARIANTS = {  # arm: its EngineOptions
    "resident-dynamic": {"decode": "dynamic"},
    "resident-nondeterministic": {"deterministic": False},  # what the deterministic kernels cost
    "resident-sdpa-attention": {"attention": "sdpa"},  # decode attention by SDPA over a gathered, padded copy
    "resident-nondeterministic-sdpa": {"deterministic": False, "attention": "sdpa"},  # the defaults before 11-29
}


def resident_rows(host, arms: list[str], args, device, router) -> list[dict]:
    """These resident arms on one device copy of the experts, freed after."""
    if not arms:
        return []
    resident = resident_weights(host, device)
    plan = plan_for(resident, "resident", None, None, args.batch, args.max_len, planned_drafts(args))
    return [run_arm(resident, arm, plan, args, device, router, args.tokens, **RESIDENT_VARIANTS.get(arm, {}))
            for arm in arms]


def budget_rows(host, budget: int, arms, args, device, router, trace, link) -> list[dict]:
    rows = []
    tokens = args.tokens
    if "wisp" in arms:
        plan = mvwsa_plan(host, budget, trace, link, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp", plan, args, device, router, tokens))
    if "wisp-sdpa-attention" in arms:
        plan = mvwsa_plan(host, budget, trace, link, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp-sdpa-attention", plan, args, device, router, tokens, attention="sdpa"))
    if "wisp-host" in arms:
        plan = mvwsa_plan(host, budget, trace, link, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp-host", plan, args, device, router, tokens, host_pager=True))
    if "wisp-prefetch" in arms:
        plan = mvwsa_plan(host, budget, trace, link, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp+prefetch", plan, args, device, router, tokens, prefetch=True))
    if "wisp-online" in arms:
        plan = mvwsa_plan(host, budget, trace, link, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp-online", plan, args, device, router, tokens, online=True))
    if "wisp-50-50" in arms:
        plan = fifty_fifty_plan(host, budget, args.batch, args.max_len)
        rows.append(run_arm(host, "wisp-50-50", plan, args, device, router, tokens))
    if "wisp-uniform" in arms:
        plan = plan_for(host, "paged", budget, None, args.batch, args.max_len, planned_drafts(args))
        rows.append(run_arm(host, "wisp-uniform", plan, args, device, router, tokens))
    if "wisp-sweep" in arms:
        for plan in sweep_plans(host.args, budget, args.batch, args.max_len, host.store.expert_bytes,
                                host.dense_bytes):
            rows.append(run_arm(host, "wisp-sweep", plan, args, device, router, tokens, runs=args.sweep_runs))
    return rows + static_rows(host, budget, arms, args, device, router)


def static_rows(host, budget: int, arms, args, device, router) -> list[dict]:
    """vLLM --cpu-offload-gb semantics: UVA reads of the touched experts, and whole-layer copies (fewer tokens)."""
    wanted = [arm for arm in ("static-uva", "static-copy") if arm in arms]
    try:
        static = plan_for(host, "static", budget, None, args.batch, args.max_len, planned_drafts(args))
    except BudgetError as err:  # static needs a whole streamed layer: more than paging's minimum
        return [failed_row(arm, budget, err) for arm in wanted]
    rows = []
    if "static-uva" in arms:
        rows.append(run_arm(host, "static-uva", static, args, device, router, args.tokens,
                            provider=lambda: TouchedCopyExperts(host.store, device, static.offloaded_layers)))
    if "static-copy" in arms:
        rows.append(run_arm(host, "static-copy", static, args, device, router, 3, runs=1))
    return rows


def main(argv: list[str] | None = None) -> None:
    argv = list(argv) if argv is not None else sys.argv[1:]
    args = parse_args(argv)
    if args.image is None and any(parse_args(argv + shlex.split(extra)).image for extra in args.also):
        print("wisp bench: --image goes on the command itself, not in --also (the tower is built once)",
              file=sys.stderr)
        raise SystemExit(2)
    device = torch.device(args.device)
    started = time.perf_counter()
    host = bench_weights(args, device)
    model_args = host.args
    facts = run_facts(args, model_args, host, device, time.perf_counter() - started)
    prompts = None
    if args.image is not None:
        host, prompts = bench_tower(host, args, device)
        facts.update(tower_facts(host, args.tower))
    print(json.dumps(facts), flush=True)
    for extra in [""] + args.also:  # each --also session reuses the built weights with its flags on top
        session = parse_args(argv + shlex.split(extra)) if extra else args
        session.shape, session.quant = args.shape, args.quant  # the built weights' (a --gguf file's)
        if session.dense_weights != args.dense_weights:  # the same experts, the dense weights rebuilt
            host = with_dense_weights(host, session, device)
            facts = {**facts, **dense_facts(host)}
        session.prompts = prompts.for_size(session.image) if prompts else TextPrompts()
        run_session(session, host, device, {**facts, **link_facts(session, facts["copy_loop_gb_s_measured"]),
                                            "trace": session.trace.name, "label": session.label})


def bench_tower(host: LoadedWeights, args, device: torch.device):
    """--image: (the weights whose plans count the tower, the ImagePrompts that feed it); a model the tower cannot
    feed is one line and exit status 2."""
    try:
        return image_prompts(host, args.tower, args.image, device)
    except BenchImageError as error:
        print(f"wisp bench: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def with_dense_weights(host: LoadedWeights, args, device: torch.device) -> LoadedWeights:
    """host's experts with the dense weights args.dense_weights asks for; host's own dense model is freed first,
    so the device holds one of the two."""
    host.model = None
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    if args.gguf is None:
        from engine.bench.synthetic import synthetic_dense_weights

        model, held = synthetic_dense_weights(host.args, host.dtype, device, args.quant, args.dense_weights)
    else:
        from engine.bench.gguf_weights import gguf_dense_weights

        _, model, held = gguf_dense_weights(args.gguf, host.dtype, device, args.dense_weights)
    return LoadedWeights(host.args, model, host.store, host.dtype, held)


def dense_facts(host: LoadedWeights) -> dict:
    """What dense weights the rows ran on: the file's quant types or the compute dtype, and their device bytes."""
    planned = host.dense_bytes or model_sizes(host.args, 2).dense_bytes - tower_plan_bytes(host.args)
    return {"dense_weights": "file" if host.dense_bytes is not None else "dtype", "dense_gib": planned / GiB}


def bench_weights(args, device: torch.device) -> LoadedWeights:
    """The weights every arm runs on: a GGUF file's (--gguf) or synthetic ones of --shape (--quant)."""
    if args.gguf is None:
        return synthetic_weights(shape_of(args), device, experts_on_host=True, quant=args.quant,
                                 dense_weights=args.dense_weights)
    from engine.bench.gguf_weights import gguf_bench_weights, gguf_file_type

    from engine.errors import WispError

    try:
        args.shape, args.quant = args.gguf.stem, gguf_file_type(args.gguf)  # what the facts and file names say
        return gguf_bench_weights(args.gguf, device, args.dense_weights)
    except WispError as error:  # a file Wisp cannot read or run: one line, as the other commands say it
        print(f"wisp bench: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def image_routing(router: TraceRouter) -> str:
    """What routes an image's positions: the trace's prompt rows, as for text (no trace of image tokens exists)."""
    rows = min(len(prefill) for prefill, _ in router.streams)
    return (f"the trace's prompt rows, as for text; positions past the shortest replayed prompt's {rows} rows take "
            "its rows again from the first")


def run_session(args, host, device, facts: dict) -> None:
    arms = args.arms.split(",")
    host = session_weights(host, args)
    trace = load_trace(args.trace)
    link = link_at(facts["copy_loop_gb_s"])
    router = TraceRouter(trace, device)
    if isinstance(prompts_of(args), ImagePrompts):
        facts = {**facts, "image_routing": image_routing(router)}
    args.out.mkdir(parents=True, exist_ok=True)
    quant = f"-{args.quant}" if args.quant else ""
    paced = f"-link{args.link_gbps:g}" if args.link_gbps else ""
    dense = "-dense-dtype" if args.quant and args.dense_weights == "dtype" else ""
    image = f"-img{args.image[0]}x{args.image[1]}" if args.image else ""
    path = args.out / f"{args.shape}{quant}{dense}-b{args.batch}{image}-p{args.prompt}{paced}-{args.trace.stem}.json"
    rows = unbudgeted_rows(host, arms, args, device, router)
    for budget in [int(float(b) * GiB) for b in args.budgets.split(",")]:
        path.write_text(json.dumps({"facts": facts, "rows": rows}))  # what is done survives a timeout
        rows += budget_rows(host, budget, arms, args, device, router, trace, link)
    path.write_text(json.dumps({"facts": facts, "rows": rows}))
    print(f"results: {path}; tables and plots: python -m bench.report {path}")


if __name__ == "__main__":
    main()
