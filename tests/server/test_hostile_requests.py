"""Hostile bodies get a 400 naming the field within seconds, and never disturb a stream in flight: it ends
with exactly the tokens it gets alone."""

import json
import time

import httpx
import pytest

from tests.server.conftest import API_KEY, health

HEADERS = {"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"}
GOOD = {"model": "wisp-demo", "prompt": "def fib(n):", "max_tokens": 40, "temperature": 0, "ignore_eos": True}
CHAT = {"model": "wisp-demo", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
ANSWER_WITHIN_S = 5.0


def post(server, body, path: str = "/chat/completions") -> httpx.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(server.url + path, content=content, headers=HEADERS, timeout=30)


def stream_tokens(server, body: dict) -> list[str]:
    """The streamed completion's token ids ("token_id:N" strings) in order."""
    tokens = []
    body = {**body, "stream": True, "logprobs": 0, "return_tokens_as_token_ids": True}
    with httpx.stream("POST", server.url + "/completions", json=body, headers=HEADERS, timeout=60) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: {"):
                choice = json.loads(line[len("data: "):])["choices"]
                tokens += choice[0]["logprobs"]["tokens"] if choice and choice[0]["logprobs"] else []
    return tokens


@pytest.mark.parametrize("body, param", [
    ({**CHAT, "messages": [{"role": "user", "content": "\ud800"}]}, "messages.0.content"),
    ({**CHAT, "messages": [{"role": "user", "content": [{"type": "text", "text": "a\udfffb"}]}]}, "messages.0.content"),
    ({**CHAT, "seed": 1180591620717411303424}, "seed"),
    ({**CHAT, "seed": -(2**64)}, "seed"),
    ({**CHAT, "stop": ["\ud800"]}, "stop.0"),
    ({**CHAT, "top_k": 2**70}, "top_k"),
    ({**CHAT, "max_tokens": 10**30}, "max_tokens"),
    ({**CHAT, "temperature": "hot"}, "temperature"),
    ({**CHAT, "messages": "hi"}, "messages"),
    ({**CHAT, "typical_p": 0.5}, "typical_p"),
])
def test_bad_values_are_400_naming_the_field(server, body, param):
    start = time.monotonic()
    response = post(server, body)
    assert response.status_code == 400 and response.json()["error"]["param"] == param
    assert time.monotonic() - start < ANSWER_WITHIN_S


@pytest.mark.parametrize("path, body", [
    ("/completions", {"model": "wisp-demo", "prompt": "\ud800", "max_tokens": 2}),
    ("/completions", {"model": "wisp-demo", "prompt": "def f(", "suffix": "\ud800", "max_tokens": 2}),
])
def test_bad_completion_text_is_400(server, path, body):
    response = post(server, body, path)
    assert response.status_code == 400 and response.json()["error"]["param"] in ("prompt", "suffix")


@pytest.mark.parametrize("raw", [
    b"[" * 30_000 + b"]" * 30_000,
    b'{"messages": ' + b"[" * 40 + b"]" * 40 + b"}",
    b'{"model": "wisp-demo", "messages": [], "temperature": NaN}',
    b'{"max_tokens": ' + b"9" * 5000 + b"}",
    b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}',
])
def test_malformed_bodies_are_400(server, raw):
    response = post(server, raw)
    assert response.status_code == 400 and response.json()["error"]["type"] == "invalid_request_error"


def test_a_model_name_that_is_not_unicode_is_400(server):
    response = post(server, {**CHAT, "model": "\ud800"})
    assert response.status_code == 400 and response.json()["error"]["param"] == "model"


def test_openai_bookkeeping_fields_are_accepted(server):
    body = {**CHAT, "user": "u1", "metadata": {"k": "v"}, "store": False, "parallel_tool_calls": False}
    assert post(server, body).status_code == 200


def test_bad_requests_leave_a_stream_in_flight_untouched(server):
    alone = stream_tokens(server, GOOD)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(stream_tokens, server, GOOD)
        too_long = {**CHAT, "messages": [{"role": "user", "content": "word " * 2500}]}  # refused at admission
        bad = [{**CHAT, "messages": [{"role": "user", "content": "\ud800"}]}, {**CHAT, "seed": 2**70},
               {**CHAT, "messages": [{"role": "user", "content": "x" * 10}], "top_k": 2**40}, too_long]
        statuses = [post(server, body).status_code for body in bad for _ in range(3)]
        assert running.result(timeout=60) == alone
    assert statuses == [400] * len(statuses) and len(alone) == GOOD["max_tokens"]


def test_health_shows_the_model_only_with_the_key(server):
    assert health(server, key=None) == {"status": "ok"}
    assert health(server, key="wrong") == {"status": "ok"}
    assert health(server)["model"] == "wisp-demo"
