"""bench/policy_sim.py's decode ceiling: quantized expert bytes, the planner's slots, and its LRU and Belady
simulators (LRU must agree with engine.alloc.miss_curve's model of the pager)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from engine.alloc.memory_plan import GiB, KV_FLOOR_BYTES
from engine.alloc.miss_curve import stack_depths, step_unique
from engine.bench.shapes import SHAPES
from engine.traces.format import TraceHeader
from engine.traces.recorder import TraceRecorder

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("policy_sim", ROOT / "bench" / "policy_sim.py")
policy_sim = importlib.util.module_from_spec(spec)
spec.loader.exec_module(policy_sim)


def test_q4_k_m_expert_bytes_follow_llama_cpp_rule():
    q4 = policy_sim.expert_bytes("qwen3-30b-a3b", "q4_k_m")
    weights = 2048 * 768
    q4_k, q6_k = weights // 256 * 144, weights // 256 * 210
    assert q4.size == 48
    assert sorted(set(q4.tolist())) == [3 * q4_k, 2 * q4_k + q6_k]
    more_bits = [i for i in range(48) if q4[i] > 3 * q4_k]
    assert more_bits[:6] == list(range(6)) and more_bits[-6:] == list(range(42, 48)) and len(more_bits) == 24
    assert policy_sim.expert_bytes("qwen3-30b-a3b", "q8_0")[0] == 3 * weights // 32 * 34
    assert policy_sim.expert_bytes("qwen3-30b-a3b", "bf16")[0] == SHAPES["qwen3-30b-a3b"].expert_numel * 2


@pytest.mark.parametrize("quant, budget", [("q4_k_m", 8), ("q4_k_m", 12), ("q8_0", 12), ("bf16", 12)])
def test_slots_are_the_most_the_budget_holds(quant, budget):
    layer_bytes = policy_sim.expert_bytes("qwen3-30b-a3b", quant)
    slots, parts = policy_sim.slots_per_layer("qwen3-30b-a3b", layer_bytes, budget)
    room = budget * GiB - (parts["dense_gib"] + parts["workspace_gib"]) * GiB - KV_FLOOR_BYTES
    row = 48 * np.ceil(layer_bytes.mean())
    assert slots * row <= room < (slots + 1) * row
    assert parts["kv_gib"] * GiB >= KV_FLOOR_BYTES


def small_trace(seed: int, num_experts: int = 12, top_k: int = 3, layers: int = 2):
    """Two requests: a prefill that needs more experts than the small caches hold, then decode steps."""
    rng = np.random.default_rng(seed)
    recorder = TraceRecorder(TraceHeader("test", "qwen3_moe", layers, num_experts, top_k, "test"))
    for seq in range(2):
        def rows(count):
            return [np.stack([rng.choice(num_experts, top_k, replace=False) for _ in range(count)])
                    for _ in range(layers)]
        recorder.record_step(rows(5), True, [seq] * 5)
        for _ in range(30):
            recorder.record_step(rows(1), False, [seq])
    return recorder.to_trace()


def stack_model_misses(trace, slots: int) -> np.ndarray:
    """Decode misses per layer by the pager's LRU model (stack depths at the start of each step)."""
    offsets, misses = trace.step_offsets, []
    for layer in range(trace.header.num_layers):
        steps = [step_unique(trace.expert_ids[offsets[s]: offsets[s + 1], layer]) for s in range(trace.num_steps)]
        depths = stack_depths(steps, trace.header.num_experts)
        decode = np.concatenate([np.full(len(e), not trace.is_prefill[s]) for s, e in enumerate(steps)])
        misses.append(int(((depths < 0) | (depths >= slots))[decode].sum()))
    return np.array(misses)


@pytest.mark.parametrize("seed", [0, 1])
def test_lru_matches_the_pager_model_and_belady_never_misses_more(seed):
    trace = small_trace(seed)
    masks, first = policy_sim.step_masks(trace)
    upcoming = policy_sim.next_uses(masks)
    decode_rows = int(trace.num_tokens[~trace.is_prefill].sum())
    for slots in (3, 5, 8, 12):
        lru, lru_hit = policy_sim.decode_misses(trace, masks, first, upcoming, slots, "lru")
        belady, belady_hit = policy_sim.decode_misses(trace, masks, first, upcoming, slots, "belady")
        np.testing.assert_allclose(lru * decode_rows, stack_model_misses(trace, slots))
        assert np.all(belady <= lru) and belady_hit >= lru_hit
        if slots == 12:  # every expert fits: only first uses miss, whatever the policy
            np.testing.assert_allclose(belady, lru)
    assert policy_sim.decode_misses(trace, masks, first, upcoming, 5, "belady")[0].sum() < \
        policy_sim.decode_misses(trace, masks, first, upcoming, 5, "lru")[0].sum()


def test_block_sizes_are_ggml_s():
    constants = pytest.importorskip("gguf.constants")
    sizes, kinds = constants.GGML_QUANT_SIZES, constants.GGMLQuantizationType
    for name, (per_block, block) in policy_sim.BLOCK_BYTES.items():
        assert sizes[kinds[name.upper()]] == (block, per_block)
