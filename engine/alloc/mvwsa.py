"""MV-WSA (torch-free): split one device pool between expert slots and the KV cache by marginal value per
byte, and the expert bytes between layers by each layer's own miss curve.

KV is a step: below the admission floor kappa_min requests cannot be admitted (infeasible), above it more KV
is worth ~0. Expert slots save (misses avoided) x (time per miss). So the KV floor is met first and every
other byte becomes a slot; each slot goes to the layer where it removes the most expected misses."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from engine.alloc.cost_model import LinkCost, RoutingProfile, decode_step_s, ttft_s



@dataclass(frozen=True)
class Split:
    name: str
    layer_slots: tuple[int, ...]
    expert_bytes: int
    kv_bytes: int
    decode_step_s: float
    ttft_s: float
    is_feasible: bool

    @property
    def decode_tok_s(self) -> float:
        return 1.0 / self.decode_step_s if self.is_feasible else 0.0


def layer_gain(profile: RoutingProfile, layer: int, slots: int) -> float:
    """Best average expected misses saved per slot over the next 1, 2, ... slots of `layer`: LRU hit curves
    are not concave (a cyclic working set gains nothing until it fits), so look along the whole curve."""
    curve, top = profile.hit_rates[layer], profile.num_experts
    if slots >= top:
        return 0.0
    steps = np.arange(1, top - slots + 1)
    return float(profile.decode_accesses[layer] * ((curve[slots + steps] - curve[slots]) / steps).max())


def greedy_steps(profile: RoutingProfile, min_slots: int):
    """Per-layer slots with equal marginal gain, one total at a time: every layer starts at min_slots, then
    each next slot goes to the layer that gains most from it. Yields the allocation after each slot."""
    slots = np.full(profile.num_layers, min(min_slots, profile.num_experts))
    heap = [(-layer_gain(profile, layer, slots[layer]), layer) for layer in range(profile.num_layers)]
    heapq.heapify(heap)
    yield slots.copy()
    while heap:
        _, layer = heapq.heappop(heap)
        slots[layer] += 1
        if slots[layer] < profile.num_experts:
            heapq.heappush(heap, (-layer_gain(profile, layer, slots[layer]), layer))
        yield slots.copy()


def greedy_layers(profile: RoutingProfile, total_slots: int, min_slots: int) -> np.ndarray:
    allocation = None
    for allocation in greedy_steps(profile, min_slots):
        if allocation.sum() >= total_slots:
            break
    return allocation


def uniform_layers(profile: RoutingProfile, total_slots: int) -> np.ndarray:
    return np.full(profile.num_layers, min(total_slots // profile.num_layers, profile.num_experts))


@dataclass(frozen=True)
class PoolSpec:
    """The pool P = budget - dense - workspace, to split into expert slots and KV."""

    pool_bytes: int
    expert_bytes: int
    kv_floor_bytes: int
    prompt_tokens: int = 512


def evaluate(name: str, profile: RoutingProfile, link: LinkCost, spec: PoolSpec, slots: np.ndarray) -> Split:
    expert_total = int(slots.sum()) * spec.expert_bytes
    kv = spec.pool_bytes - expert_total
    return Split(
        name=name, layer_slots=tuple(int(s) for s in slots), expert_bytes=expert_total, kv_bytes=kv,
        decode_step_s=decode_step_s(profile, slots, link, spec.expert_bytes),
        ttft_s=ttft_s(profile, slots, link, spec.expert_bytes, spec.prompt_tokens),
        is_feasible=kv >= spec.kv_floor_bytes and bool((slots >= profile.top_k).all()),
    )


def slots_for(spec: PoolSpec, kv_bytes: int) -> int:
    return max(0, (spec.pool_bytes - kv_bytes) // spec.expert_bytes)


def configure(profile: RoutingProfile, link: LinkCost, spec: PoolSpec) -> dict[str, Split]:
    """The configured split (per-layer or uniform, whichever the model predicts faster) and the comparisons:
    uniform cap, a fixed 50/50 split, an expert-heavy split with no KV floor, and the exhaustive oracle."""
    total = slots_for(spec, spec.kv_floor_bytes)
    per_layer = evaluate("mv-wsa per-layer", profile, link, spec, greedy_layers(profile, total, profile.top_k))
    uniform = evaluate("mv-wsa uniform cap", profile, link, spec, uniform_layers(profile, total))
    chosen = min((per_layer, uniform), key=lambda s: (not s.is_feasible, s.decode_step_s))
    half = slots_for(spec, spec.pool_bytes // 2)
    heavy = slots_for(spec, spec.kv_floor_bytes // 8)
    return {
        "configured": chosen,
        "per_layer": per_layer,
        "uniform": uniform,
        "fifty_fifty": evaluate("50/50", profile, link, spec, uniform_layers(profile, half)),
        "expert_heavy_no_floor": evaluate("expert-heavy, no KV floor", profile, link, spec,
                                          greedy_layers(profile, heavy, profile.top_k)),
        "oracle": oracle(profile, link, spec),
    }


def oracle(profile: RoutingProfile, link: LinkCost, spec: PoolSpec) -> Split:
    """Exhaustive search of the same cost model over every expert/KV split point (one slot apart), each
    with the better of per-layer and uniform allocation."""
    best = None
    most = min(slots_for(spec, 0), profile.num_layers * profile.num_experts)
    for greedy in greedy_steps(profile, profile.top_k):
        total = int(greedy.sum())
        if total > most:
            break
        for slots in (greedy, uniform_layers(profile, total)):
            split = evaluate("oracle", profile, link, spec, slots)
            if split.is_feasible and (best is None or split.decode_step_s < best.decode_step_s):
                best = split
    return best
