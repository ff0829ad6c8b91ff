"""Overlapped decode steps (LLMEngine.step with overlap): the next decode step is launched on the device's sampled
tokens before the host reads them. Every request must stream what it streams without overlap: the same tokens,
alternatives, text and finish reasons, through stops, length limits, KV block boundaries, a full KV pool, cancels
and requests that arrive mid-stream. Logprobs are compared within 1e-4: which requests share a step depends on when
the test's threads submit them, and on the CPU a batch's size changes the last bits of its matmuls."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.bench.trace_router import TraceRouter
from engine.events import FinishEvent
from tests.experts.test_expert_modes import PROMPTS
from engine.traces.format import Trace, TraceHeader

GREEDY = SamplingParams(max_tokens=20, ignore_eos=True, top_logprobs=2)
SEEDED = SamplingParams(max_tokens=17, temperature=0.8, top_k=40, top_p=0.9, seed=3, ignore_eos=True)
SHORT = SamplingParams(max_tokens=5, ignore_eos=True)
WITH_EOS = SamplingParams(max_tokens=30, temperature=1.3, seed=11)


def same_events(a: list, b: list) -> bool:
    """Equal events, logprobs (and alternatives' logprobs) within 1e-4."""
    def split(results):
        exact, numbers = [], []
        for events in results:
            for event in events:
                if event[0] == "finish":
                    exact.append(event)
                else:
                    token, logprob, top, text = event
                    exact.append((token, tuple(t for t, _ in top), text))
                    numbers += [logprob, *(value for _, value in top)]
        return exact, numbers

    (exact_a, numbers_a), (exact_b, numbers_b) = split(a), split(b)
    return exact_a == exact_b and len(numbers_a) == len(numbers_b) and all(
        abs(x - y) <= 1e-4 for x, y in zip(numbers_a, numbers_b))


def streamed(engine: Engine, request: GenerateRequest) -> tuple:
    """Every event of one request, as its consumer sees them."""
    out = []
    for event in engine.submit(request):
        if isinstance(event, FinishEvent):
            out.append(("finish", event.reason, event.error))
        else:
            out.append((event.token_id, event.logprob, event.top_logprobs, event.text))
    return tuple(out)


def workload(folder, overlap: bool, **options) -> tuple[list, int, set]:
    """Requests alone, a batch of mixed lengths and samplings, and requests submitted while others stream ->
    (each request's events, the decode steps launched ahead, the prefix cache's block hashes)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", max_model_len=96,
                              **options)) as engine:
        engine._core.overlap = overlap
        results = [streamed(engine, GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))]
        word = next(text for _, _, _, text in results[0][3:-1] if text.strip())  # a word it streams after 3 tokens
        stop_word = SamplingParams(max_tokens=24, ignore_eos=True, stop=(word,))
        requests = [GenerateRequest(prompt=PROMPTS[0], sampling=stop_word),
                    GenerateRequest(prompt=PROMPTS[1], sampling=SEEDED),
                    GenerateRequest(prompt=PROMPTS[2], sampling=SHORT),
                    GenerateRequest(prompt=PROMPTS[1], sampling=WITH_EOS),
                    GenerateRequest(prompt=PROMPTS[2], sampling=GREEDY)]
        outputs: dict[int, tuple] = {}

        def consume(index: int, request: GenerateRequest) -> None:
            outputs[index] = streamed(engine, request)

        threads = [threading.Thread(target=consume, args=(i, r)) for i, r in enumerate(requests[:3])]
        for thread in threads:
            thread.start()
        threads[0].join()  # the others arrive while the rest of the first wave still decodes
        late = [threading.Thread(target=consume, args=(i, r)) for i, r in enumerate(requests[3:], start=3)]
        for thread in late:
            thread.start()
        for thread in threads + late:
            thread.join()
        results += [outputs[i] for i in range(len(requests))]
        ahead = engine._core.steps_ahead
        cached = set(engine._core.scheduler.block_manager.hash_to_block)  # full blocks, prompt and output
    return results, ahead, cached


@pytest.mark.parametrize("name", ["qwen3_moe", "qwen2_moe", "qwen3_5_moe"])  # the last a hybrid
def test_overlapped_steps_stream_the_same_events(tiny_model_dir, name):
    folder = tiny_model_dir(name)
    reference, none_ahead, cached = workload(folder, overlap=False)
    overlapped, ahead, cached_overlapped = workload(folder, overlap=True)
    assert none_ahead == 0 and ahead > 20  # most decode steps went ahead
    assert [r[-1] for r in reference][1] == ("finish", "stop", None)  # the stop string ended that one early
    assert same_events(overlapped, reference)
    assert cached_overlapped == cached  # the blocks a step ahead filled joined the prefix cache as they do without


def test_overlap_at_block_boundaries_and_with_a_full_kv_pool(tiny_model_dir):
    """Blocks of 4 positions: a step ahead often needs a fresh block; 12 blocks: the batch runs out and preempts,
    and a step ahead is not launched without a free block."""
    folder = tiny_model_dir("qwen3_moe")
    options = dict(block_size=4, kv_blocks=12, prefill_chunk=0)
    reference, _, _ = workload(folder, overlap=False, **options)
    overlapped, ahead, _ = workload(folder, overlap=True, **options)
    assert ahead > 0
    assert same_events(overlapped, reference)


def test_a_cancel_between_overlapped_steps_ends_that_request_alone(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    long = SamplingParams(max_tokens=40, ignore_eos=True)

    def run(overlap: bool):
        with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", max_model_len=96)) as engine:
            engine._core.overlap = overlap
            kept, cancelled = engine.submit_batch([GenerateRequest(prompt=PROMPTS[0], sampling=long),
                                                   GenerateRequest(prompt=PROMPTS[1], sampling=long)])
            seen = []
            for event in cancelled:
                seen.append(event)
                if len(seen) == 6:
                    engine.cancel(cancelled.request_id)
            kept_result = kept.result()
            after = engine.generate(GenerateRequest(prompt=PROMPTS[2], sampling=GREEDY))  # the engine goes on
        return kept_result.token_ids, seen[-1].reason, after.token_ids

    reference = run(False)
    assert reference[1] == "cancelled"
    assert run(True) == reference


def stepping_trace(num_layers: int = 2, num_experts: int = 8, steps: int = 12) -> Trace:
    """Two requests: 3 prompt rows each, then decode rows whose experts change at every step."""
    def rows(first: int, count: int) -> np.ndarray:
        return np.array([[[(first + i) % num_experts, (first + i + 1) % num_experts]] * num_layers
                         for i in range(count)])

    decode = [rows(0, steps), rows(3, steps)]
    ids = np.concatenate([rows(0, 3), rows(4, 3), *[np.stack([decode[0][i], decode[1][i]]) for i in range(steps)]])
    seq_ids = np.array([0] * 3 + [1] * 3 + [0, 1] * steps, dtype=np.int32)
    header = TraceHeader("tiny", "qwen3_moe", num_layers, num_experts, 2, "test")
    return Trace(header, np.array([True] + [False] * steps), np.array([6] + [2] * steps, np.int32),
                 ids.astype(np.uint8), seq_ids)


def test_trace_routing_follows_each_sequence_in_steps_ahead(tiny_model_dir):
    """The benchmark's trace router picks a step's decode rows from its sequences' positions: a step launched
    ahead is one position past token_ids (ModelRunner.lookahead), so it must route the same rows as without."""
    def routed(overlap: bool):
        with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", decode="static",
                                  max_model_len=64)) as engine:
            core = engine._core
            core.overlap = overlap
            router = TraceRouter(stepping_trace(), torch.device("cpu"))
            router.drive(core)
            steps = []
            hook = core.runner.step_hook

            def record(seqs, is_prefill):
                hook(seqs, is_prefill)
                steps.append(router.step_ids.clone().tolist())

            core.runner.step_hook = record
            sampling = SamplingParams(max_tokens=9, ignore_eos=True)
            results = [h.result() for h in engine.submit_batch(
                [GenerateRequest(prompt_token_ids=(5, 6, 7, 8), sampling=sampling),
                 GenerateRequest(prompt_token_ids=(9, 10, 11), sampling=sampling)])]
        return steps, [r.token_ids for r in results], core.steps_ahead

    steps, tokens, none_ahead = routed(False)
    steps_overlapped, tokens_overlapped, ahead = routed(True)
    assert none_ahead == 0 and ahead > 0
    assert steps_overlapped == steps and tokens_overlapped == tokens


def test_no_step_goes_ahead_where_a_row_needs_its_token_on_the_host(tiny_model_dir):
    """Penalties read the tokens so far: such a batch runs one step at a time."""
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", decode="static",
                              max_model_len=64)) as engine:
        engine._core.overlap = True
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(
            max_tokens=8, ignore_eos=True, repetition_penalty=1.2)))
        assert engine._core.steps_ahead == 0
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=8, ignore_eos=True)))
        assert engine._core.steps_ahead > 0


def test_a_drained_engine_holds_no_step_in_flight(tiny_model_dir):
    """A cancel that drains the engine leaves a step launched ahead for the cancelled row: the barrier after it
    (where a re-split may move the KV pool and drop the graphs) waits for that step and drops it first."""
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu", decode="static",
                              max_model_len=96)) as engine:
        engine._core.overlap = True
        handle = engine.submit(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=60,
                                                                                           ignore_eos=True)))
        for count, _ in enumerate(handle, start=1):
            if count == 5:
                engine.cancel(handle.request_id)
        assert handle.finish.reason == "cancelled"
        engine.count_prompt_tokens(GenerateRequest(prompt="x"))  # runs on the engine thread, after the barrier
        assert engine._core.steps_ahead > 0 and engine._core.inflight is None


def test_hybrid_rows_step_ahead(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_5_moe")), device="cpu", decode="static",
                              max_model_len=64)) as engine:
        engine._core.overlap = True
        request = GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=8, ignore_eos=True))
        engine.generate(request)
        assert engine._core.steps_ahead > 0
