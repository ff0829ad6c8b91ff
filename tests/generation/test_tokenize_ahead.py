"""Prompts are tokenised on api.Engine's tokenizer thread: a megabyte prompt leaves the engine thread stepping
the other streams, a request cancelled before its admission ends "cancelled", and order is kept."""

import time

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

BIG = "word " * 400_000  # 2 MB, 800k tokens: seconds to tokenise


@pytest.fixture(scope="module")
def demo_engine():
    with Engine(EngineOptions(model=None, device="cpu")) as engine:
        yield engine


def test_a_megabyte_prompt_does_not_stall_a_running_stream(demo_engine):
    good = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=200, ignore_eos=True))
    alone = demo_engine.generate(good).token_ids
    arrivals = []
    handle = demo_engine.submit(GenerateRequest(prompt=good.prompt, sampling=good.sampling),
                                lambda event: arrivals.append(time.monotonic()))
    while not arrivals:
        time.sleep(0.01)
    big = demo_engine.submit(GenerateRequest(prompt=BIG, sampling=SamplingParams(max_tokens=2)))
    assert handle.result().token_ids == alone
    assert big.result().reason == "error" and "context holds" in big.finish.error
    assert max(later - earlier for earlier, later in zip(arrivals, arrivals[1:])) < 2.0


def test_a_request_cancelled_before_admission_ends_cancelled(demo_engine):
    slow = demo_engine.submit(GenerateRequest(prompt=BIG, sampling=SamplingParams(max_tokens=2)))
    queued = GenerateRequest(prompt="hi", sampling=SamplingParams(max_tokens=50, ignore_eos=True))
    handle = demo_engine.submit(queued)
    demo_engine.cancel(queued.request_id)
    assert handle.result().reason == "cancelled" and slow.result().reason == "error"
    after = demo_engine.generate(GenerateRequest(prompt="hi", sampling=SamplingParams(max_tokens=3)))
    assert after.reason == "length"
