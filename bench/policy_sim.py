"""How much a better expert-cache policy could gain, and the decode ceiling it allows.

Default: LRU (what the pager does), LFU with decay, and Belady's offline optimum, simulated on a trace's decode
rows, each request from a cold cache, on every 6th layer:

    python bench/policy_sim.py resources/traces/qwen3-twin_code.npz --slots 16,37,54

--ceiling: for each expert format (bf16, Q8_0, Q4_K_M with llama.cpp's per-layer ffn_down rule) and budget, the
planner's slots per layer (dense weights bf16, KV floor, workspace: engine.alloc.memory_plan with the format's
expert bytes), the LRU and Belady decode hit rates at those slots on every layer (the trace's steps in order, one
cache per layer carried across requests, prefill steps warm it and are not counted), and the decode ceiling
1 / (miss bytes per token / link rate + resident compute time per token):

    python bench/policy_sim.py --ceiling resources/traces/qwen3-twin_chat.npz ... --out DIR

--replay PROMPT,TOKENS simulates the traces as `wisp bench --prompt PROMPT --tokens TOKENS` replays them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.alloc.memory_plan import GiB, PlanRequest, plan_memory  # noqa: E402
from engine.model.shapes import SHAPES  # noqa: E402
from engine.model.sizes import model_sizes  # noqa: E402
from engine.traces.format import Trace, load  # noqa: E402

# Bytes per block of weights: ggml's Q4_K (144 per 256), Q6_K (210 per 256), Q8_0 (34 per 32), and bf16.
BLOCK_BYTES = {"q4_k": (144, 256), "q6_k": (210, 256), "q8_0": (34, 32), "bf16": (2, 1)}
LINKS_GBPS = {"H200 pinned (PCIe5)": 53.8, "PCIe4 desktop": 24.0}
COMPUTE_MS = (8.56, 6.0, 10.0)  # 8.56: resident bf16 decode step measured on the H200; quantized: unknown yet
MAX_LEN = 4096  # the suite's default --max-len: the planner's workspace and KV floor


def requests(trace, layer: int) -> list[list[set[int]]]:
    decode = ~trace.row_is_prefill()
    return [[set(int(e) for e in row) for row in trace.expert_ids[(trace.seq_ids == seq) & decode][:, layer]]
            for seq in np.unique(trace.seq_ids)]


def hit_rate(steps_of_requests, slots: int, policy: str, num_experts: int, decay: float = 0.9) -> float:
    hits = uses = 0
    for steps in steps_of_requests:
        cache: dict[int, int] = {}  # expert -> last step used
        frequency = np.zeros(num_experts)
        for step, needed in enumerate(steps):
            hits += len(needed & cache.keys())
            uses += len(needed)
            frequency *= decay
            for expert in needed:
                frequency[expert] += 1
                cache[expert] = step
            victims = [e for e in cache if e not in needed]
            if policy == "lru":
                victims.sort(key=lambda e: cache[e])
            elif policy == "lfu":
                victims.sort(key=lambda e: (frequency[e], cache[e]))
            else:  # belady: evict what is needed furthest in the future
                def next_use(e):
                    return next((j for j in range(step + 1, len(steps)) if e in steps[j]), len(steps))
                victims.sort(key=next_use, reverse=True)
            for expert in victims[: max(0, len(cache) - slots)]:
                del cache[expert]
    return hits / uses


def use_more_bits(layer: int, num_layers: int) -> bool:
    """llama.cpp's rule (llama-quant.cpp) for the layers whose ffn_down gets Q6_K in a Q4_K_M file."""
    return layer < num_layers // 8 or layer >= 7 * num_layers // 8 or (layer - num_layers // 8) % 3 == 2


def expert_bytes(shape: str, quant: str) -> np.ndarray:
    """Bytes of one expert (gate, up, down) per MoE layer: [L]."""
    args = SHAPES[shape]
    weights, layers = args.hidden_size * args.moe_intermediate_size, args.num_moe_layers

    def size(kind: str) -> int:
        per_block, block = BLOCK_BYTES[kind]
        return weights // block * per_block

    if quant == "q4_k_m":
        return np.array([2 * size("q4_k") + size("q6_k" if use_more_bits(i, layers) else "q4_k")
                         for i in range(layers)])
    return np.full(layers, 3 * size(quant))


def slots_per_layer(shape: str, layer_bytes: np.ndarray, budget_gib: float) -> tuple[int, dict]:
    """The paged planner's slots per layer at this budget, with experts of the mean quantized size."""
    sizes = replace(model_sizes(SHAPES[shape], 2), expert_bytes=math.ceil(layer_bytes.mean()))
    request = PlanRequest(mode="paged", budget_bytes=int(budget_gib * GiB), block_size=16, max_model_len=MAX_LEN,
                          max_num_seqs=1, max_batched_tokens=MAX_LEN)
    plan = plan_memory(sizes, request)
    parts = {"dense_gib": plan.dense_bytes / GiB, "workspace_gib": plan.workspace_bytes / GiB,
             "kv_gib": plan.kv_bytes / GiB, "experts_gib": plan.expert_device_bytes / GiB}
    return plan.min_layer_slots, parts


def step_masks(trace) -> tuple[np.ndarray, np.ndarray]:
    """Which experts each step needs at each layer ([S, L, E] bool) and where each first appears in the step
    ([S, L, E]: token order, then router order), the pager's recency order inside a step (engine.alloc.miss_curve)."""
    h = trace.header
    masks = np.zeros((trace.num_steps, h.num_layers, h.num_experts), dtype=bool)
    first = np.full(masks.shape, np.iinfo(np.int32).max, dtype=np.int32)
    offsets = trace.step_offsets
    for step in range(trace.num_steps):
        rows = trace.expert_ids[offsets[step]: offsets[step + 1]].astype(np.int64)  # [T, L, K]
        layer = np.broadcast_to(np.arange(h.num_layers)[None, :, None], rows.shape).reshape(-1)
        position = (np.arange(rows.shape[0])[:, None, None] * h.top_k + np.arange(h.top_k)[None, None, :])
        np.minimum.at(first[step], (layer, rows.reshape(-1)), np.broadcast_to(position, rows.shape).reshape(-1))
        masks[step, layer, rows.reshape(-1)] = True
    return masks, first


def next_uses(masks: np.ndarray) -> np.ndarray:
    """For each step, the next later step that needs each expert (S when none): [S, L, E]."""
    steps = masks.shape[0]
    following = np.full(masks.shape[1:], steps, dtype=np.int32)
    result = np.empty(masks.shape, dtype=np.int32)
    for step in range(steps - 1, -1, -1):
        result[step] = following
        following = np.where(masks[step], step, following)
    return result


def decode_misses(trace, masks: np.ndarray, first: np.ndarray, upcoming: np.ndarray, slots: int,
                  policy: str) -> tuple[np.ndarray, float]:
    """Misses per decode token at each layer ([L]) and the decode hit rate (over the experts decode steps need),
    with `slots` per layer under LRU ("lru") or Belady ("belady").
    A step's needed experts that are not cached miss and are loaded; then each layer evicts down to its slots:
    first experts the step did not need, least recently used (LRU) or needed furthest ahead (Belady), then,
    when one step needed more experts than there are slots (a prefill), needed ones in the same order."""
    steps, layers, experts = masks.shape
    width = int(trace.num_tokens.max()) * trace.header.top_k  # recency = step, then position in the step
    cache = np.zeros((layers, experts), dtype=bool)
    last = np.zeros((layers, experts), dtype=np.int64)
    misses = np.zeros(layers)
    decode_rows = accesses = 0
    for step in range(steps):
        need = masks[step]
        if not trace.is_prefill[step]:
            misses += (need & ~cache).sum(axis=1)
            accesses += int(need.sum())
            decode_rows += int(trace.num_tokens[step])
        cache |= need
        last[need] = step * width + first[step][need]
        excess = cache.sum(axis=1) - slots
        if excess.max() <= 0:
            continue
        ahead = (step + 1) * width - last if policy == "lru" else upcoming[step]  # larger = evicted first
        score = np.where(cache, np.where(need, 0, (steps + 1) * width + 1) + ahead, -1)
        rank = np.empty_like(last)
        np.put_along_axis(rank, np.argsort(-score, axis=1, kind="stable"), np.arange(experts)[None, :], axis=1)
        cache &= ~(rank < excess[:, None])
    return misses / max(decode_rows, 1), 1 - misses.sum() / max(accesses, 1)


def replayed(trace: Trace, prompt: int, tokens: int) -> Trace:
    """The trace as `wisp bench --prompt P --tokens T` replays it (engine.bench.trace_router): each request that
    decoded, one after another, its prompt rows cycled to P, then its decode rows cycled to T."""
    from engine.bench.trace_router import replay_streams  # imports torch

    streams = replay_streams(trace)
    ids = np.concatenate([np.concatenate([rows[np.arange(prompt) % len(rows)], decode[np.arange(tokens) % len(decode)]])
                          for rows, decode in streams])
    count = len(streams)
    return Trace(header=replace(trace.header, workload=f"{trace.header.workload}, replayed {prompt}+{tokens}"),
                 is_prefill=np.array(([True] + [False] * tokens) * count),
                 num_tokens=np.array(([prompt] + [1] * tokens) * count, dtype=np.int32),
                 expert_ids=ids, seq_ids=np.repeat(np.arange(count, dtype=np.int32), prompt + tokens))


def ceiling_rows(trace_path: Path, shape: str, quants: list[str], budgets: list[float],
                 replay: tuple[int, int] | None = None) -> list[dict]:
    trace = load(trace_path)
    name = trace_path.stem
    if replay is not None:
        trace, name = replayed(trace, *replay), f"{name} (bench replay {replay[0]}+{replay[1]})"
    masks, first = step_masks(trace)
    upcoming = next_uses(masks)
    rows = []
    for quant in quants:
        layer_bytes = expert_bytes(shape, quant)
        for budget in budgets:
            slots, parts = slots_per_layer(shape, layer_bytes, budget)
            row = {"trace": name, "quant": quant, "budget_gib": budget, "slots": slots,
                   "expert_mb_mean": layer_bytes.mean() / 1e6, **parts}
            for policy in ("lru", "belady"):
                per_layer, row[f"{policy}_hit"] = decode_misses(trace, masks, first, upcoming, slots, policy)
                row[f"{policy}_misses_per_token"] = float(per_layer.sum())
                row[f"{policy}_mb_per_token"] = float(per_layer @ layer_bytes) / 1e6
                for link, gbps in LINKS_GBPS.items():
                    for compute in COMPUTE_MS:
                        step_ms = row[f"{policy}_mb_per_token"] / gbps + compute  # MB / (GB/s) = ms
                        row[f"{policy}_tok_s[{link}, {compute} ms]"] = 1000 / step_ms
            rows.append(row)
    return rows


def ceiling_table(rows: list[dict], compute: float = COMPUTE_MS[0]) -> str:
    """Markdown: per trace, format and budget, slots, hit rates, miss MB per token and the ceilings."""
    h200, pcie4 = LINKS_GBPS
    others = [c for c in COMPUTE_MS if c != compute]
    lines = ["| trace | experts | budget | slots/layer | hit LRU / Belady | MB/token LRU / Belady | "
             f"H200 tok/s, {compute} ms: LRU / Belady | H200 Belady, " + " / ".join(f"{c:g}" for c in others) +
             f" ms | PCIe4 tok/s, {compute} ms: LRU / Belady |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def tok(policy, link, c=compute):
            return f"{r[f'{policy}_tok_s[{link}, {c} ms]']:.1f}"

        lines.append(f"| {r['trace']} | {r['quant']} | {r['budget_gib']:g} GiB | {r['slots']} | "
                     f"{r['lru_hit']:.3f} / {r['belady_hit']:.3f} | "
                     f"{r['lru_mb_per_token']:.0f} / {r['belady_mb_per_token']:.0f} | "
                     f"{tok('lru', h200)} / **{tok('belady', h200)}** | "
                     + " / ".join(tok("belady", h200, c) for c in others) + " | "
                     f"{tok('lru', pcie4)} / {tok('belady', pcie4)} |")
    return "\n".join(lines)


TARGETS = ((12.0, 45.0), (8.0, 30.0))  # issue 27: Q4_K_M tok/s at batch 1 at these budgets (GiB)


def verdict_table(rows: list[dict], quant: str = "q4_k_m") -> str:
    """Markdown: per trace and target, the transfer time per token (LRU / Belady) on each link and the most
    resident compute time per token that still reaches the target: reachable iff the compute time is below."""
    lines = ["| trace | target | " + " | ".join(f"{link}: transfer ms LRU / Belady -> compute headroom ms"
                                                for link in LINKS_GBPS) + " |", "|---|---|---|---|"]
    for budget, target in TARGETS:
        for r in (r for r in rows if r["quant"] == quant and r["budget_gib"] == budget):
            cells = []
            for gbps in LINKS_GBPS.values():
                ms = {p: r[f"{p}_mb_per_token"] / gbps for p in ("lru", "belady")}
                room = {p: 1000 / target - ms[p] for p in ms}
                cells.append(f"{ms['lru']:.1f} / {ms['belady']:.1f} -> {room['lru']:.1f} / {room['belady']:.1f}")
            lines.append(f"| {r['trace']} | {target:g} tok/s at {budget:g} GiB ({r['slots']} slots) | "
                         + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", type=Path, nargs="+")
    parser.add_argument("--slots", default="16,37,54", help="without --ceiling: slots per layer to simulate")
    parser.add_argument("--ceiling", action="store_true", help="planner slots, hit rates and decode ceilings")
    parser.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES))
    parser.add_argument("--quants", default="q4_k_m,q8_0,bf16", help="expert formats: q4_k_m, q8_0, bf16")
    parser.add_argument("--budgets", default="8,12,16,24", help="GiB")
    parser.add_argument("--replay", help="with --ceiling: PROMPT,TOKENS: simulate the trace as the bench replays it")
    parser.add_argument("--out", type=Path, help="with --ceiling: a folder for ceiling[-replay].json and .md")
    args = parser.parse_args()
    if args.ceiling:
        quants, budgets = args.quants.split(","), [float(b) for b in args.budgets.split(",")]
        replay = tuple(int(n) for n in args.replay.split(",")) if args.replay else None
        rows = [row for path in args.traces for row in ceiling_rows(path, args.shape, quants, budgets, replay)]
        table = ceiling_table(rows) + "\n\n" + verdict_table(rows)
        print(table)
        if args.out:
            args.out.mkdir(parents=True, exist_ok=True)
            facts = {"shape": args.shape, "links_gbps": LINKS_GBPS, "compute_ms": COMPUTE_MS, "max_len": MAX_LEN,
                     "expert_bytes": {q: expert_bytes(args.shape, q).tolist() for q in quants}}
            stem = "ceiling-replay" if replay else "ceiling"
            facts["replay"] = replay
            (args.out / f"{stem}.json").write_text(json.dumps({"facts": facts, "rows": rows}, indent=1))
            (args.out / f"{stem}.md").write_text(table + "\n")
        return
    for path in args.traces:
        trace = load(path)
        layers = range(0, trace.expert_ids.shape[1], 6)
        per_layer = [requests(trace, layer) for layer in layers]
        print(f"{path.name}\nslots | " + " | ".join(("lru", "lfu", "belady")))
        for slots in (int(s) for s in args.slots.split(",")):
            rates = [np.mean([hit_rate(r, slots, p, trace.header.num_experts) for r in per_layer])
                     for p in ("lru", "lfu", "belady")]
            print(f"{slots} | " + " | ".join(f"{rate:.3f}" for rate in rates))


if __name__ == "__main__":
    main()
