"""Every sampling value the API accepts gives a token (never NaN), and a request whose sampling or text
handling fails ends alone: the others in its batch finish with exactly the tokens they get alone."""

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.generation import text_stream
from engine.generation.sampler import FAILED_TOKEN, sample
from engine.sampling import MIN_TEMPERATURE
from engine.sampling_checks import MAX_TEMPERATURE

VOCAB = 64


@settings(max_examples=300, deadline=None)
@given(temperature=st.floats(0.0, MAX_TEMPERATURE), top_p=st.floats(0.0, 1.0, exclude_min=True),
       top_k=st.integers(0, 2**31 - 1), scale=st.sampled_from([1.0, 1e3, 1e30]), seed=st.integers(0, 2**32))
@example(temperature=1e-40, top_p=1.0, top_k=0, scale=1.0, seed=0)
@example(temperature=5e-324, top_p=1.0, top_k=0, scale=1.0, seed=0)
@example(temperature=1.0, top_p=1e-300, top_k=0, scale=1.0, seed=0)
@example(temperature=1e-6, top_p=5e-324, top_k=1, scale=1e30, seed=0)
def test_every_accepted_value_samples_a_token(temperature, top_p, top_k, scale, seed):
    logits = torch.randn(1, VOCAB, generator=torch.Generator().manual_seed(seed)) * scale  # [1, V]
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k)
    tokens, logprobs = sample(logits, [params], [torch.Generator().manual_seed(seed)])
    assert 0 <= tokens[0] < VOCAB and not math.isnan(logprobs[0])
    if temperature < MIN_TEMPERATURE or top_p < 1e-30:
        assert tokens[0] == int(torch.argmax(logits))


def test_a_row_of_nan_scores_fails_alone():
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(1))  # [3, V]
    alone = sample(logits[1:], [SamplingParams(temperature=0.7)] * 2,
                   [torch.Generator().manual_seed(seed) for seed in (5, 6)])
    logits[0] = float("nan")
    tokens, logprobs = sample(logits, [SamplingParams(temperature=0.7)] * 3,
                              [torch.Generator().manual_seed(s) for s in (4, 5, 6)])
    assert tokens[0] == FAILED_TOKEN and (tokens[1:], logprobs[1:]) == alone


@pytest.fixture(scope="module")
def demo_engine():
    with Engine(EngineOptions(model=None, device="cpu")) as engine:
        yield engine


def test_a_request_whose_stream_raises_ends_alone(demo_engine, monkeypatch):
    good = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=24, ignore_eos=True))
    alone = demo_engine.generate(good).token_ids
    original = text_stream.TextStream.for_request

    def broken_for_bad(tokenizer, request, prompt_ids):
        stream = original(tokenizer, request, prompt_ids)
        if request.request_id == "bad":
            stream.push = lambda token_id: (_ for _ in ()).throw(ValueError("a parser bug"))
        return stream

    monkeypatch.setattr(text_stream.TextStream, "for_request", staticmethod(broken_for_bad))
    bad = GenerateRequest(prompt="hello", request_id="bad", sampling=SamplingParams(max_tokens=24))
    handles = demo_engine.submit_batch([GenerateRequest(prompt=good.prompt, sampling=good.sampling), bad])
    good_finish, bad_finish = (handle.result() for handle in handles)
    assert bad_finish.reason == "error" and "a parser bug" in bad_finish.error
    assert good_finish.reason == "length" and good_finish.token_ids == alone
