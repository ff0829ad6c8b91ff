"""MV-WSA on synthetic traces whose optimum is known analytically."""

import numpy as np

from engine.alloc.cost_model import LinkCost
from engine.alloc.mvwsa import PoolSpec, configure, greedy_layers, uniform_layers
from engine.traces.format import Trace, TraceHeader
from engine.traces.profile import routing_profile

LINK = LinkCost(h2d_bytes_per_s=50e9, per_miss_s=0.0, dense_step_s=0.01, prefill_token_s=0.0)
EXPERT = 10_000_000  # bytes: one miss = 0.2 ms


def cyclic_trace(cycle_lengths: list[int], num_experts: int = 16, steps: int = 400) -> Trace:
    """Decode-only, one token per step, top-1: layer l cycles through its first cycle_lengths[l] experts.
    LRU with fewer slots than the cycle never hits; with at least that many, always hits (after warm-up)."""
    ids = np.stack([[[s % n] for n in cycle_lengths] for s in range(steps)]).astype(np.uint8)  # [N, L, 1]
    header = TraceHeader("synthetic", "qwen3_moe", len(cycle_lengths), num_experts, 1, "cyclic")
    return Trace(header, np.zeros(steps, bool), np.ones(steps, np.int32), ids, np.zeros(steps, np.int32))


def test_per_layer_shares_follow_each_layers_working_set():
    profile = routing_profile(cyclic_trace([4, 12]))
    assert list(greedy_layers(profile, 16, 1)) == [4, 12]
    assert list(uniform_layers(profile, 16)) == [8, 8]  # layer 1 then never hits (cycle of 12 > 8 slots)


def test_configured_split_meets_kv_floor_then_gives_experts_the_rest():
    profile = routing_profile(cyclic_trace([4, 12]))
    spec = PoolSpec(pool_bytes=20 * EXPERT, expert_bytes=EXPERT, kv_floor_bytes=4 * EXPERT)
    splits = configure(profile, LINK, spec)
    chosen = splits["configured"]
    assert chosen.is_feasible and chosen.layer_slots == (4, 12) and chosen.kv_bytes == 4 * EXPERT
    assert splits["uniform"].decode_step_s > chosen.decode_step_s
    one_miss = EXPERT / 50e9  # uniform: layer 1 misses every step; per-layer: only the 16 cold misses in 400 steps
    assert abs(chosen.decode_step_s - LINK.dense_step_s - 16 / 400 * one_miss) < 1e-9
    assert splits["uniform"].decode_step_s - chosen.decode_step_s > 0.9 * one_miss
    assert not splits["expert_heavy_no_floor"].is_feasible
    assert abs(splits["oracle"].decode_step_s - chosen.decode_step_s) <= 0.03 * splits["oracle"].decode_step_s


def test_fifty_fifty_loses_when_experts_need_the_bytes():
    profile = routing_profile(cyclic_trace([12, 12]))
    spec = PoolSpec(pool_bytes=32 * EXPERT, expert_bytes=EXPERT, kv_floor_bytes=4 * EXPERT)
    splits = configure(profile, LINK, spec)
    assert min(splits["configured"].layer_slots) >= 12 and sum(splits["configured"].layer_slots) == 28
    assert splits["fifty_fifty"].layer_slots == (8, 8)
    assert splits["fifty_fifty"].decode_step_s > splits["configured"].decode_step_s * 1.01
