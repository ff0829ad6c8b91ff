"""Trace-driven routing: the engine's experts follow the trace's ids, stream by stream."""

import numpy as np
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.bench.trace_router import TraceRouter
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
        core.runner.model.routing_observer = lambda layer, ids: seen.append(ids.tolist())
        engine.generate(GenerateRequest(prompt_token_ids=(5, 6, 7, 8), sampling=SamplingParams(max_tokens=3, ignore_eos=True)))
    assert seen[0] == [[0, 1], [0, 1], [0, 1], [0, 1]]  # prefill rows of stream 0, cycled
    assert seen[2] == [[4, 5]] and seen[4] == [[4, 5]]  # its decode rows
