"""The full sampling API through the official openai client: penalties, logit_bias, min_p, top_k, n choices,
top_logprobs and structured output, for chat and completions, streamed and not."""

import json

import openai
import pytest
from pydantic import BaseModel

from engine.api import GenerateRequest, SamplingParams
from engine.server import ServerLimits, start_server
from tests.server.conftest import API_KEY, health, wait_until

CHAT = [{"role": "user", "content": "Name a colour."}]
PROMPT = "def fib(n):"


def test_seeded_choices_equal_single_requests_with_consecutive_seeds(client):
    kwargs = dict(model="wisp-demo", prompt=PROMPT, max_tokens=12, temperature=1.0, seed=40, logprobs=0)
    both = client.completions.create(n=2, **kwargs)
    assert [c.index for c in both.choices] == [0, 1]
    for index, choice in enumerate(both.choices):
        assert choice.text == client.completions.create(**{**kwargs, "seed": 40 + index}).choices[0].text
    single = client.completions.create(**kwargs)
    assert both.usage.prompt_tokens == single.usage.prompt_tokens
    assert both.usage.completion_tokens == sum(len(choice.logprobs.tokens) for choice in both.choices)


def test_streamed_choices_carry_their_index_and_one_usage_chunk(client):
    stream = client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=8, n=3, temperature=1.0,
                                            seed=1, stream=True, stream_options={"include_usage": True})
    texts, usages = {0: "", 1: "", 2: ""}, []
    for chunk in stream:
        usages += [chunk.usage] if chunk.usage else []
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
    whole = client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=8, n=3, temperature=1.0,
                                           seed=1)
    assert texts == {c.index: c.message.content for c in whole.choices}
    assert len(usages) == 1 and usages[0].completion_tokens == whole.usage.completion_tokens


def test_streamed_choices_give_their_slots_back(demo_engine):
    """n choices take n of the server's request slots while they stream and give them all back at the end: a
    server that allows 3 at once answers streamed n=3 requests one after another (none is refused as busy)."""
    handle = start_server(demo_engine, "127.0.0.1", 0, api_key=API_KEY, limits=ServerLimits(max_concurrent_requests=3))
    try:
        client = openai.OpenAI(base_url=handle.url, api_key=API_KEY, max_retries=0, timeout=60)
        for _ in range(3):
            stream = client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=4, n=3, stream=True)
            assert sum(1 for chunk in stream for choice in chunk.choices if choice.finish_reason) == 3
            assert wait_until(lambda: health(handle)["requests_in_flight"] == 0)
    finally:
        handle.stop()


def test_top_logprobs_for_chat_and_completions(client):
    chat = client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=5, temperature=0,
                                          logprobs=True, top_logprobs=4)
    for entry in chat.choices[0].logprobs.content:
        assert len(entry.top_logprobs) == 4 and entry.top_logprobs[0].logprob == pytest.approx(entry.logprob)
    text = client.completions.create(model="wisp-demo", prompt=PROMPT, max_tokens=5, temperature=0, logprobs=3)
    assert all(len(alternatives) == 3 for alternatives in text.choices[0].logprobs.top_logprobs)


def test_penalties_bias_and_filters_reach_the_engine(client, demo_engine):
    fields = dict(max_tokens=10, temperature=0.8, top_p=0.9, seed=3, presence_penalty=0.5, frequency_penalty=0.5,
                  logit_bias={"5": 10.0})
    extra = {"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.2}
    response = client.completions.create(model="wisp-demo", prompt=PROMPT, extra_body=extra, **fields)
    sampling = SamplingParams(max_tokens=10, temperature=0.8, top_p=0.9, seed=3, presence_penalty=0.5,
                              frequency_penalty=0.5, logit_bias=((5, 10.0),), top_k=20, min_p=0.05,
                              repetition_penalty=1.2)
    direct = demo_engine.generate(GenerateRequest(prompt=PROMPT, sampling=sampling))
    assert response.choices[0].text == direct.text


class Colour(BaseModel):
    name: str
    hex_digits: int


def test_structured_output_json_schema_and_json_object(client):
    parsed = client.chat.completions.parse(model="wisp-demo", messages=CHAT, max_tokens=200,
                                                response_format=Colour, temperature=0.3, seed=2)
    message = parsed.choices[0].message
    assert parsed.choices[0].finish_reason == "stop" and isinstance(message.parsed, Colour)
    loose = client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=64, temperature=0,
                                           response_format={"type": "json_object"}, stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in loose if chunk.choices)
    assert text.startswith("{")


def test_vllm_and_llama_cpp_schema_fields_are_taken(client):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    for field, value in (("guided_json", schema), ("json_schema", json.dumps(schema))):
        raw = client.completions.with_raw_response.create(model="wisp-demo", prompt="{", max_tokens=20,
                                                          extra_body={field: value})
        assert isinstance(json.loads(raw.parse().choices[0].text)["ok"], bool)
        assert "warning" not in raw.headers
