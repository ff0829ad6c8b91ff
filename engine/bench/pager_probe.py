"""Issue-3 measurements on a CUDA machine, Qwen3-30B-A3B shape, synthetic weights, the model's own router:
the pager's miss copy rate against a plain pinned copy loop, paged-with-every-expert-resident against
resident decode, and peak device memory against the budget for several budgets.

    python -m engine.bench.pager_probe --out DIR [--layers N] [--tokens N]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from dataclasses import asdict
from pathlib import Path

import torch

from engine.alloc.memory_plan import GiB, PlanRequest, plan_memory
from engine.bench.shapes import shape
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
from engine.config import EngineOptions
from engine.experts.store import ExpertStore
from engine.model.loader import LoadedWeights
from engine.model.sizes import model_sizes
from engine.requests import GenerateRequest
from engine.runtime.builder import assemble_engine
from engine.sampling import SamplingParams

MAX_MODEL_LEN = 4096


def copy_loop_rate(store: ExpertStore, device, num_copies: int = 400) -> float:
    """GB/s of a plain loop of one-expert pinned->device copies (the pager's copy size)."""
    layer = next(iter(store.blocks.values()))
    slots = [torch.empty(store.layout.numel, dtype=layer.dtype, device=device) for _ in range(16)]
    experts = torch.randint(0, store.num_experts, (num_copies,)).tolist()
    for i in range(32):
        slots[i % 16].copy_(layer[experts[i]], non_blocking=True)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i, e in enumerate(experts):
        slots[i % 16].copy_(layer[e], non_blocking=True)
    end.record()
    end.synchronize()
    return num_copies * store.expert_bytes / (start.elapsed_time(end) / 1000) / 1e9


def plan_for(weights: LoadedWeights, mode: str, budget: int | None, slots: int | None):
    request = PlanRequest(mode=mode, budget_bytes=budget, block_size=16, max_model_len=MAX_MODEL_LEN, max_num_seqs=1,
                          max_batched_tokens=MAX_MODEL_LEN, expert_slots=slots)
    return plan_memory(model_sizes(weights.args, 2), request)


def decode(engine, prompt_len: int, tokens: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, engine.runner.model.args.vocab_size, (prompt_len,), generator=generator).tolist()
    engine.add(GenerateRequest(prompt_token_ids=tuple(ids), sampling=SamplingParams(max_tokens=tokens, ignore_eos=True)))
    finish = None
    while engine.has_work:
        for event in engine.step():
            finish = event if hasattr(event, "stats") else finish
    torch.cuda.synchronize()
    return {"decode_tok_s": finish.stats.decode_tok_s, "ttft_s": finish.stats.ttft_s, "tokens": list(finish.token_ids)}


def run_arm(weights, name, mode, budget, slots, args, device, warm_all=False) -> dict:
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    plan = plan_for(weights, mode, budget, slots)
    options = EngineOptions(device="cuda", experts=mode, max_num_seqs=1, max_model_len=MAX_MODEL_LEN)
    engine = assemble_engine(weights, IdOnlyTokenizer(), options, plan, device, MAX_MODEL_LEN)
    provider = weights.model.experts
    if warm_all:
        provider.warm({layer: list(range(weights.args.num_experts)) for layer in weights.store.blocks})
    decode(engine, args.prompt, 8, seed=99)  # warm-up: kernels, allocator, first experts
    before = provider.counters.snapshot()
    result = decode(engine, args.prompt, args.tokens, seed=1)
    if hasattr(provider, "copies"):
        provider.copies.synchronize()
    after = provider.counters
    misses, copy_s = after.misses - before.misses, after.copy_s - before.copy_s
    h2d = after.h2d_bytes - before.h2d_bytes
    row = {
        "arm": name, "mode": mode, "budget_gib": budget / GiB if budget else None,
        "slots_per_layer": plan.slots_per_layer, "offloaded_layers": plan.offloaded_layers,
        "decode_tok_s": result["decode_tok_s"], "ttft_s": result["ttft_s"],
        "hit_rate": (after.hits - before.hits) / max(1, after.hits - before.hits + misses),
        "h2d_bytes_per_token": h2d / args.tokens, "miss_h2d_gb_s": h2d / copy_s / 1e9 if copy_s else None,
        "peak_bytes": torch.cuda.max_memory_allocated(device), "plan_bytes": plan.total_bytes,
        "tokens": result["tokens"],
    }
    weights.model.experts = None
    del engine, provider
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--budgets", default="8,12,16,24,32")
    args = parser.parse_args()
    device = torch.device("cuda")
    model_args = shape("qwen3-30b-a3b", args.layers)
    start = time.perf_counter()
    host = synthetic_weights(model_args, device, experts_on_host=True)
    build_s = time.perf_counter() - start
    rows, facts = [], {"build_s": build_s, "expert_bytes": host.store.expert_bytes, "pinned": host.store.is_pinned,
                       "layers": model_args.num_hidden_layers, "gpu": torch.cuda.get_device_name(device),
                       "torch": torch.__version__}
    facts["copy_loop_gb_s"] = copy_loop_rate(host.store, device)
    device_store = ExpertStore(host.store.layout, list(host.store.blocks), model_args.num_experts, torch.bfloat16, device)
    for layer, block in host.store.blocks.items():
        device_store.blocks[layer].copy_(block)
    resident = LoadedWeights(model_args, host.model, device_store, torch.bfloat16)
    rows.append(run_arm(resident, "resident", "resident", None, None, args, device))
    del resident, device_store
    rows.append(run_arm(host, "paged-all-resident", "paged", None, model_args.num_experts, args, device, warm_all=True))
    for budget in [int(b) * GiB for b in args.budgets.split(",")]:
        rows.append(run_arm(host, f"paged-{budget // GiB}GiB", "paged", budget, None, args, device))
    rows.append(run_arm(host, "static-24GiB", "static", 24 * GiB, None, argparse.Namespace(**{**vars(args), "tokens": 4}), device))
    report(rows, facts, args.out)


def report(rows: list[dict], facts: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "pager_probe.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=1))
    reference = rows[0]["tokens"]
    print(json.dumps(facts))
    print(f"{'arm':22} {'slots':>5} {'tok/s':>8} {'hit':>6} {'MB/tok':>8} {'miss GB/s':>9} {'peak GiB':>9} {'budget':>7} same")
    for r in rows:
        same = r["tokens"] == reference[: len(r["tokens"])]
        miss_rate = f"{r['miss_h2d_gb_s']:.1f}" if r["miss_h2d_gb_s"] else "-"
        print(f"{r['arm']:22} {r['slots_per_layer']:>5} {r['decode_tok_s']:>8.2f} {r['hit_rate']:>6.3f} "
              f"{r['h2d_bytes_per_token'] / 1e6:>8.1f} {miss_rate:>9} {r['peak_bytes'] / GiB:>9.2f} "
              f"{(r['budget_gib'] or 0):>7.0f} {same}")


if __name__ == "__main__":
    main()
