"""Chunked prefill: a long prompt runs a few positions a step, each chunk attending to the KV of the chunks before
it (full attention, gpt-oss's sliding window and sinks, DeepSeek's MLA), and a request already streaming keeps
getting tokens between the chunks, both requests' tokens those of each alone (and their logprobs, bit for bit
while they run in steps of their own)."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, TokenEvent
from engine.errors import RequestError

CHUNK = 8  # gpt_oss's tiny model has a window of 8: chunks reach across it
LONG = tuple(3 + (i * 37) % 360 for i in range(61))  # 61 prompt tokens: 8 chunks, the last one partial
SHORT = "def fib(n):"
STREAMING = SamplingParams(max_tokens=40, temperature=0.8, seed=5, ignore_eos=True)
LONG_SAMPLING = SamplingParams(max_tokens=6, ignore_eos=True)


def options(folder, chunk: int) -> EngineOptions:
    return EngineOptions(model=str(folder), device="cpu", prefill_chunk=chunk)


def alone(folder, chunk: int, request: GenerateRequest) -> tuple:
    with Engine(options(folder, chunk)) as engine:
        result = engine.generate(request)
    assert result.error is None, result.error
    return result.token_ids, result.logprobs


def long_request() -> GenerateRequest:
    return GenerateRequest(prompt_token_ids=LONG, sampling=LONG_SAMPLING)


@pytest.mark.parametrize("model", ["qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_next", "qwen3_5_moe"])
def test_chunks_attend_to_the_chunks_before_them(tiny_model_dir, model):
    """The prompt in chunks computes what the whole prompt computes (other row counts: bits may differ)."""
    folder = tiny_model_dir(model)
    chunked, whole = alone(folder, CHUNK, long_request()), alone(folder, 0, long_request())
    assert chunked[0] == whole[0]
    assert chunked[1] == pytest.approx(whole[1], abs=1e-4)


@pytest.mark.parametrize("model", ["qwen3_moe", "gpt_oss", "deepseek_v3", "qwen3_next", "qwen3_5_moe"])
def test_a_long_prompt_does_not_stall_a_stream_and_both_stay_exact(tiny_model_dir, model):
    folder = tiny_model_dir(model)
    short_alone = alone(folder, CHUNK, GenerateRequest(prompt=SHORT, sampling=STREAMING))
    long_alone = alone(folder, CHUNK, long_request())
    steps = []
    with Engine(options(folder, CHUNK)) as engine:
        engine._core.runner.step_hook = lambda seqs, is_prefill: steps.append(
            (is_prefill, [seq.request_id for seq in seqs]))
        streaming = engine.submit(GenerateRequest(prompt=SHORT, sampling=STREAMING))
        events = iter(streaming)
        for _ in range(3):  # it streams before the long prompt arrives
            assert isinstance(next(events), TokenEvent)
        long = engine.submit(long_request())
        long_result, short_result = long.result(), streaming.result()
    chunks = [i for i, (is_prefill, ids) in enumerate(steps) if is_prefill and long.request_id in ids]
    # Until the long prompt's first token the stream decodes alone: bit for bit. Decode steps of both together
    # run other GEMM row counts, whose logprobs on the CPU differ in the last bits without chunks too (tokens not).
    alone_tokens = sum(1 for _, ids in steps[: chunks[-1] + 1] if streaming.request_id in ids)
    assert short_result.token_ids == short_alone[0] and long_result.token_ids == long_alone[0]
    assert short_result.logprobs[:alone_tokens] == short_alone[1][:alone_tokens]
    assert short_result.logprobs == pytest.approx(short_alone[1], abs=1e-4)
    assert long_result.logprobs[0] == long_alone[1][0]  # the first token: from its last chunk, alone
    assert long_result.logprobs == pytest.approx(long_alone[1], abs=1e-4)
    assert len(chunks) == -(-len(LONG) // CHUNK)
    between = steps[chunks[0] + 1 : chunks[-1]]
    assert sum(1 for is_prefill, ids in between if not is_prefill and streaming.request_id in ids) >= len(chunks) - 1


def test_prefill_chunk_must_not_be_negative():
    with pytest.raises(RequestError, match="prefill_chunk"):
        EngineOptions(prefill_chunk=-1)
