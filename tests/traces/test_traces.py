import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from engine.alloc.miss_curve import hit_rate_curve, stack_depths, stack_depths_many, step_unique
from engine.traces import format as trace_format
from engine.cli.trace import register
from engine.traces.format import TraceFormatError, TraceHeader
from engine.traces.recorder import TraceRecorder, topk_from_router_logits
from engine.traces.stats import layer_depths, popularity, previous_token_reuse, summary

TRACES = Path(__file__).resolve().parents[2] / "resources" / "traces"
TWINS = {"qwen3-twin": (48, 128, 8), "olmoe-twin": (16, 64, 8), "mixtral-twin": (32, 8, 2)}
WORKLOADS = ("code", "chat", "multi_turn", "batched")


def brute_force_lru_hit_rate(steps: list[np.ndarray], slots: int) -> float:
    """The pager's rule simulated directly: needed experts that are resident hit; afterwards
    the cache keeps the `slots` most recently used experts (ties in step order)."""
    last_use: dict[int, int] = {}
    clock = hits = accesses = 0
    for experts in steps:
        hits += sum(int(e) in last_use for e in experts)
        accesses += len(experts)
        for e in experts:
            last_use[int(e)] = clock
            clock += 1
        while len(last_use) > slots:
            del last_use[min(last_use, key=last_use.get)]
    return hits / accesses


def random_trace(rng, num_steps=40, num_layers=3, num_experts=16, top_k=4) -> trace_format.Trace:
    recorder = TraceRecorder(TraceHeader("test", "qwen3_moe", num_layers, num_experts, top_k, "random"))
    for step in range(num_steps):
        tokens = 9 if step == 0 else int(rng.integers(1, 4))
        layers = [np.stack([rng.choice(num_experts, top_k, replace=False) for _ in range(tokens)])
                  for _ in range(num_layers)]
        recorder.record_step(layers, step == 0, list(range(tokens)) if step else [0] * tokens)
    return recorder.to_trace()


def test_round_trip_keeps_every_field(tmp_path):
    trace = random_trace(np.random.default_rng(0))
    trace_format.save(trace, tmp_path / "t.npz")
    loaded = trace_format.load(tmp_path / "t.npz")
    assert loaded.header == trace.header
    for name in ("is_prefill", "num_tokens", "expert_ids", "seq_ids"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(trace, name))
    assert loaded.expert_ids.dtype == np.uint8


def test_recorder_rejects_wrong_layer_count():
    recorder = TraceRecorder(TraceHeader("m", "qwen3_moe", 2, 8, 2, "w"))
    with pytest.raises(TraceFormatError):
        recorder.record_step([np.zeros((3, 2), int)], True)


def test_load_rejects_a_non_trace_file(tmp_path):
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(TraceFormatError):
        trace_format.load(tmp_path / "bad.npz")


def test_topk_from_router_logits_is_in_router_order():
    logits = np.array([[0.1, 3.0, -1.0, 2.0]])
    assert topk_from_router_logits(logits, 2).tolist() == [[1, 3]]


@pytest.mark.parametrize("seed", range(5))
def test_miss_curve_equals_brute_force_lru_on_random_streams(seed):
    rng = np.random.default_rng(seed)
    num_experts = 12
    steps = [step_unique(rng.choice(num_experts, (int(rng.integers(1, 6)), 3))) for _ in range(60)]
    curve = hit_rate_curve(stack_depths(steps, num_experts), num_experts)
    for slots in range(1, num_experts + 1):
        assert curve[slots] == pytest.approx(brute_force_lru_hit_rate(steps, slots))


@pytest.mark.parametrize("seed", range(5))
def test_depths_of_many_streams_at_once_equal_one_stream_at_a_time(seed):
    """The online controller's one-pass depths over all layers: streams of different lengths, steps of different
    sizes (batched decode), empty streams."""
    rng = np.random.default_rng(seed)
    num_experts = 16
    streams = [[step_unique(rng.choice(num_experts, (int(rng.integers(1, 4)), 4))) for _ in range(length)]
               for length in (0, 1, 37, 60, 60)]
    streams.append([step_unique(rng.choice(num_experts, 4, replace=False)) for _ in range(50)])  # fixed size
    for stream, depths in zip(streams, stack_depths_many(streams, num_experts), strict=True):
        assert np.array_equal(depths, stack_depths(stream, num_experts))  # one stream alone: checked by brute force
    assert stack_depths_many([], num_experts) == []


@pytest.mark.parametrize("name", ["mixtral-twin_code", "olmoe-twin_batched", "qwen3-twin_multi_turn"])
def test_miss_curve_equals_brute_force_lru_on_shipped_trace(name):
    trace = trace_format.load(TRACES / f"{name}.npz")
    offsets = trace.step_offsets
    num_steps = min(trace.num_steps, 120)
    steps = [step_unique(trace.expert_ids[offsets[s]: offsets[s + 1], 0, :]) for s in range(num_steps)]
    curve = hit_rate_curve(stack_depths(steps, trace.header.num_experts), trace.header.num_experts)
    for slots in sorted({1, trace.header.top_k, trace.header.num_experts // 2, trace.header.num_experts}):
        assert curve[slots] == pytest.approx(brute_force_lru_hit_rate(steps, slots))
    assert layer_depths(trace, 0).size >= len(steps)


def test_previous_token_reuse_counts_shared_experts_within_a_request():
    recorder = TraceRecorder(TraceHeader("m", "qwen3_moe", 1, 8, 2, "w"))
    recorder.record_step([np.array([[0, 1], [5, 6]])], True, [0, 1])  # two requests, one token each
    recorder.record_step([np.array([[1, 2], [7, 6]])], False, [0, 1])  # each shares one expert
    trace = recorder.to_trace()
    assert previous_token_reuse(trace) == pytest.approx(0.5)
    assert previous_token_reuse(trace, decode_only=True) == pytest.approx(0.5)
    np.testing.assert_allclose(popularity(trace).sum(axis=1), 1.0)


@pytest.mark.parametrize("twin", sorted(TWINS))
@pytest.mark.parametrize("workload", WORKLOADS)
def test_shipped_traces_have_the_twin_topology(twin, workload):
    path = TRACES / f"{twin}_{workload}.npz"
    assert path.stat().st_size <= 2 * 1024 * 1024
    trace = trace_format.load(path)
    h = trace.header
    assert (h.num_layers, h.num_experts, h.top_k) == TWINS[twin]
    assert h.workload == workload and trace.is_prefill[0] and (~trace.is_prefill).sum() > 0
    if workload == "batched":
        assert np.unique(trace.seq_ids).size == 4 and trace.num_tokens[1] == 4


def test_stats_command_prints_json(capsys):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["trace", "stats", str(TRACES / "mixtral-twin_chat.npz"), "--json"])
    assert args.handler(args) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["num_experts"] == 8 and len(stats["lru_hit_rate_by_slots"]) == 9
    assert stats["lru_hit_rate_by_slots"][8] == pytest.approx(summary(trace_format.load(
        TRACES / "mixtral-twin_chat.npz"))["lru_hit_rate_by_slots"][8])


def test_record_command_writes_a_trace_of_the_demo_model(tmp_path):
    pytest.importorskip("transformers")
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "def add(a, b):"}\n{"messages": [{"role": "user", "content": "Hi"}]}\n')
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    demo = TRACES.parent / "demo_model"
    args = parser.parse_args(["trace", "record", str(demo), "--prompts", str(prompts), "--out",
                              str(tmp_path / "t.npz"), "--workload", "smoke", "--max-tokens", "5"])
    assert args.handler(args) == 0
    trace = trace_format.load(tmp_path / "t.npz")
    assert (trace.header.num_layers, trace.header.num_experts, trace.header.top_k) == (8, 16, 4)
    assert trace.header.workload == "smoke" and trace.is_prefill.sum() == 2
    assert set(np.unique(trace.seq_ids)) == {0, 1} and (trace.num_tokens[~trace.is_prefill] == 1).all()
