"""Statistics of a routing trace: per-layer expert popularity, token-to-token expert reuse, and
the LRU hit-rate curve (engine.alloc.miss_curve) per layer and pooled over layers."""

from __future__ import annotations

import dataclasses

import numpy as np

from engine.alloc.miss_curve import hit_rate_curve, stack_depths, step_unique
from engine.traces.format import Trace

COVERAGE = 0.9


def popularity(trace: Trace) -> np.ndarray:
    """Share of routing slots each expert received, per layer: [L, E], rows sum to 1."""
    h = trace.header
    counts = np.stack([np.bincount(trace.expert_ids[:, layer, :].reshape(-1), minlength=h.num_experts)
                       for layer in range(h.num_layers)]).astype(float)  # [L, E]
    return counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)


def experts_to_cover(shares: np.ndarray, coverage: float = COVERAGE) -> np.ndarray:
    """Per layer, how many of the most popular experts carry `coverage` of the routing: [L]."""
    ordered = -np.sort(-shares, axis=1)
    return (np.cumsum(ordered, axis=1) < coverage - 1e-12).sum(axis=1) + 1


def previous_token_pairs(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (previous, current) of consecutive tokens of the same request."""
    rows = np.arange(trace.seq_ids.size)
    order = rows[np.argsort(trace.seq_ids, kind="stable")]  # rows of each request in token order
    same = trace.seq_ids[order[1:]] == trace.seq_ids[order[:-1]]
    return order[:-1][same], order[1:][same]


def previous_token_reuse(trace: Trace, decode_only: bool = False) -> float:
    """Mean share of a token's top-k experts that the previous token of its request also used
    (over layers and tokens). Random routing scores top_k / num_experts."""
    previous, current = previous_token_pairs(trace)
    if decode_only:
        keep = ~trace.row_is_prefill()[current]
        previous, current = previous[keep], current[keep]
    if current.size == 0:
        return float("nan")
    a, b = trace.expert_ids[current], trace.expert_ids[previous]  # [P, L, K]
    shared = (a[..., :, None] == b[..., None, :]).any(axis=-1).sum(axis=-1)  # [P, L]
    return float(shared.mean() / trace.header.top_k)


def layer_depths(trace: Trace, layer: int) -> np.ndarray:
    offsets = trace.step_offsets
    steps = (step_unique(trace.expert_ids[offsets[s]: offsets[s + 1], layer, :]) for s in range(trace.num_steps))
    return stack_depths(steps, trace.header.num_experts)


def lru_hit_rates(trace: Trace) -> np.ndarray:
    """Hit rate per layer for 0..num_experts slots of that layer: [L, E+1]."""
    h = trace.header
    return np.stack([hit_rate_curve(layer_depths(trace, layer), h.num_experts) for layer in range(h.num_layers)])


def pooled_hit_rates(trace: Trace) -> np.ndarray:
    """Hit rate for 0..num_experts slots per layer, accesses pooled over all layers: [E+1]."""
    depths = np.concatenate([layer_depths(trace, layer) for layer in range(trace.header.num_layers)])
    return hit_rate_curve(depths, trace.header.num_experts)


def summary(trace: Trace) -> dict:
    h = trace.header
    shares = popularity(trace)
    covered = experts_to_cover(shares)
    per_layer_hits = lru_hit_rates(trace)
    return {
        "model": h.model, "model_type": h.model_type, "workload": h.workload,
        "num_layers": h.num_layers, "num_experts": h.num_experts, "top_k": h.top_k,
        "steps": trace.num_steps, "prefill_steps": int(trace.is_prefill.sum()),
        "decode_steps": int((~trace.is_prefill).sum()), "tokens": int(trace.num_tokens.sum()),
        "requests": int(np.unique(trace.seq_ids).size),
        "top_expert_share_mean": round(float(shares.max(axis=1).mean()), 4),
        "experts_for_90pct_mean": round(float(covered.mean()), 2),
        "experts_for_90pct_per_layer": covered.tolist(),
        "previous_token_reuse": round(previous_token_reuse(trace), 4),
        "previous_token_reuse_decode": round(previous_token_reuse(trace, decode_only=True), 4),
        "random_reuse": round(h.top_k / h.num_experts, 4),
        "lru_hit_rate_by_slots": [round(float(x), 4) for x in pooled_hit_rates(trace)],
        "lru_hit_rate_by_slots_per_layer": np.round(per_layer_hits, 4).tolist(),
    }


def random_routing(trace: Trace, seed: int = 0) -> Trace:
    """The trace's step structure with each token routed to top_k distinct experts uniformly at random per
    layer: the baseline resources/traces/STATS.md sets beside every trace."""
    h = trace.header
    scores = np.random.default_rng(seed).random((trace.expert_ids.shape[0], h.num_layers, h.num_experts))
    ids = np.argpartition(scores, h.top_k - 1, axis=-1)[..., :h.top_k]  # [N, L, K]
    return dataclasses.replace(trace, expert_ids=ids.astype(trace.expert_ids.dtype))


def format_summary(stats: dict) -> str:
    curve = stats["lru_hit_rate_by_slots"]
    num_experts, top_k = stats["num_experts"], stats["top_k"]
    picks = sorted({s for s in (top_k, 2 * top_k, num_experts // 8, num_experts // 4, num_experts // 2)
                    if 0 < s <= num_experts})
    lines = [
        f"{stats['model']} ({stats['model_type']}), workload {stats['workload']}: {stats['num_layers']} layers x "
        f"{num_experts} experts, top-{top_k}",
        f"steps {stats['steps']} ({stats['prefill_steps']} prefill, {stats['decode_steps']} decode), "
        f"tokens {stats['tokens']}, requests {stats['requests']}",
        f"popularity: top expert {stats['top_expert_share_mean']:.1%} of routing (mean over layers), "
        f"{stats['experts_for_90pct_mean']:.1f} of {num_experts} experts cover 90%",
        f"previous-token reuse: {stats['previous_token_reuse']:.1%} all tokens, "
        f"{stats['previous_token_reuse_decode']:.1%} decode (random {stats['random_reuse']:.1%})",
        "LRU hit rate (slots per layer -> hit): " + "  ".join(f"{s}:{curve[s]:.2f}" for s in picks),
    ]
    return "\n".join(lines)
