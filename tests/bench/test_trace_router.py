"""Trace-driven routing: the engine's experts follow the trace's ids, stream by stream."""

import numpy as np
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.bench.trace_router import MIN_DECODE_ROWS, TraceRouter
from engine.traces.format import Trace, TraceHeader


def two_stream_trace(num_layers=2, num_experts=8, top_k=2) -> Trace:
    prefill = [np.array([[[0, 1]] * num_layers] * 3), np.array([[[2, 3]] * num_layers] * 3)]
    decode = [np.array([[[4, 5]] * num_layers] * 5), np.array([[[6, 7]] * num_layers] * 5)]
    ids = np.concatenate([prefill[0], prefill[1], *[np.stack([decode[0][i], decode[1][i]]) for i in range(5)]])
    seq_ids = np.array([0] * 3 + [1] * 3 + [0, 1] * 5, dtype=np.int32)
    header = TraceHeader("tiny", "qwen3_moe", num_layers, num_experts, top_k, "test")
    return Trace(header, np.array([True] + [False] * 5), np.array([6] + [2] * 5, np.int32), ids.astype(np.uint8), seq_ids)


def test_routing_follows_the_trace(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as engine:
        core = engine._core
        router = TraceRouter(two_stream_trace(), torch.device("cpu"))
        seen = []
        router.drive(core)
        core.runner.routing_observer = lambda layer, ids: seen.append(ids.tolist())
        engine.generate(GenerateRequest(prompt_token_ids=(5, 6, 7, 8), sampling=SamplingParams(max_tokens=3, ignore_eos=True)))
    assert seen[0] == [[0, 1], [0, 1], [0, 1], [0, 1]]  # prefill rows of stream 0, cycled
    assert seen[2] == [[4, 5]] and seen[4] == [[4, 5]]  # its decode rows


def test_requests_with_few_decode_rows_are_not_replayed():
    trace = two_stream_trace()
    long_decode = np.array([[[6, 7]] * 2] * MIN_DECODE_ROWS, dtype=np.uint8)
    longer = Trace(trace.header, np.concatenate([trace.is_prefill, [False] * MIN_DECODE_ROWS]),
                   np.concatenate([trace.num_tokens, [1] * MIN_DECODE_ROWS]).astype(np.int32),
                   np.concatenate([trace.expert_ids, long_decode]),
                   np.concatenate([trace.seq_ids, [1] * MIN_DECODE_ROWS]).astype(np.int32))
    router = TraceRouter(longer, torch.device("cpu"))
    assert len(router.streams) == 1 and len(router.streams[0][1]) == 5 + MIN_DECODE_ROWS  # stream 1 only
    assert len(TraceRouter(trace, torch.device("cpu")).streams) == 2  # nothing longer: every stream stays


def test_a_trace_holds_moe_layers_only_so_dense_layers_take_no_column():
    """GLM-4.5-Air's layer 0 is a dense MLP: its trace column 0 is model layer 1."""
    from types import SimpleNamespace

    trace = two_stream_trace()
    ids = trace.expert_ids.copy()
    ids[:, 1] += 1  # the second MoE layer routes to other experts than the first
    router = TraceRouter(Trace(trace.header, trace.is_prefill, trace.num_tokens, ids, trace.seq_ids),
                         torch.device("cpu"))
    args = SimpleNamespace(moe_layers=(False, True, True))
    engine = SimpleNamespace(runner=SimpleNamespace(model=SimpleNamespace(args=args)))
    router.drive(engine)
    seq = SimpleNamespace(request_id="r", prefill_start=0, prefill_end=3, token_ids=[1, 2, 3],
                          num_prompt_tokens=3)
    router.begin_step([seq], is_prefill=True)
    assert router(1).tolist() == [[0, 1]] * 3 and router(2).tolist() == [[1, 2]] * 3
