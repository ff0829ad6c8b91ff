"""How much a better expert-cache policy could gain: LRU (what the pager does), LFU with decay, and Belady's
offline optimum, simulated on a trace's decode rows, each request from a cold cache, on every 6th layer.

    python bench/policy_sim.py resources/traces/qwen3-twin_code.npz --slots 16,37,54
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.traces.format import load  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("trace", type=Path)
    parser.add_argument("--slots", default="16,37,54")
    args = parser.parse_args()
    trace = load(args.trace)
    layers = range(0, trace.expert_ids.shape[1], 6)
    per_layer = [requests(trace, layer) for layer in layers]
    print("slots | " + " | ".join(("lru", "lfu", "belady")))
    for slots in (int(s) for s in args.slots.split(",")):
        rates = [np.mean([hit_rate(r, slots, p, trace.header.num_experts) for r in per_layer])
                 for p in ("lru", "lfu", "belady")]
        print(f"{slots} | " + " | ".join(f"{rate:.3f}" for rate in rates))


if __name__ == "__main__":
    main()
