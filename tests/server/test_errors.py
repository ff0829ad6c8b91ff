"""A bad request per error code, answered in OpenAI's error shape; nothing in a request names a file."""

import httpx
import openai
import pytest

from engine.server import ServerLimits, start_server
from tests.server.conftest import API_KEY

CHAT = [{"role": "user", "content": "hi"}]


def error_of(excinfo) -> dict:
    return excinfo.value.body if isinstance(excinfo.value.body, dict) else {}


@pytest.mark.parametrize("kwargs, param", [
    ({"temperature": 5}, "temperature"),
    ({"n": 9}, "n"),
    ({"max_tokens": 100_000}, "max_tokens"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages.0.role"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools"),
    ({"presence_penalty": 2.5}, "presence_penalty"),
    ({"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    ({"logit_bias": {"not-an-id": 1}}, "logit_bias"),
    ({"response_format": {"type": "yaml"}}, "response_format.type"),
    ({"extra_body": {"mirostat": 1}}, "mirostat"),
])
def test_bad_chat_requests_are_400_naming_the_field(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as excinfo:
        client.chat.completions.create(**{"model": "wisp-demo", "messages": CHAT, "max_tokens": 4, **kwargs})
    assert error_of(excinfo)["param"] == param and excinfo.value.body["type"] == "invalid_request_error"


def test_suffix_without_fill_in_the_middle_tokens_is_400(client):
    with pytest.raises(openai.BadRequestError, match="fill-in-the-middle"):
        client.completions.create(model="wisp-demo", prompt="def f(", suffix="):\n", max_tokens=4)


def test_prompt_longer_than_the_context_is_400(client):
    with pytest.raises(openai.BadRequestError, match="context"):
        client.completions.create(model="wisp-demo", prompt="word " * 2500, max_tokens=4)


def test_token_ids_outside_the_vocabulary_are_400(client):
    with pytest.raises(openai.BadRequestError, match="vocabulary"):
        client.completions.create(model="wisp-demo", prompt=[1, 10**9], max_tokens=4)


def test_body_that_is_not_json_is_400(server):
    response = httpx.post(server.url + "/chat/completions", content=b"{not json",
                          headers={"Authorization": f"Bearer {API_KEY}", "Content-Type": "application/json"})
    assert response.status_code == 400 and "JSON" in response.json()["error"]["message"]


def test_wrong_or_missing_key_is_401(server):
    wrong = openai.OpenAI(base_url=server.url, api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.models.list()
    response = httpx.get(server.url + "/models")
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"


def test_unknown_route_is_404_in_openai_shape(server):
    response = httpx.post(server.url + "/audio/speech", json={"input": "x"},
                          headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 404 and response.json()["error"]["type"] == "not_found_error"


def test_body_over_the_limit_is_413(client):
    with pytest.raises(openai.APIStatusError) as excinfo:
        client.chat.completions.create(model="wisp-demo", messages=[{"role": "user", "content": "x" * 100_000}])
    assert excinfo.value.status_code == 413 and error_of(excinfo)["code"] == "request_too_large"


def test_requests_beyond_the_concurrency_cap_are_429(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0, limits=ServerLimits(max_concurrent_requests=1))
    try:
        client = openai.OpenAI(base_url=handle.url, api_key="unused", max_retries=0)
        with client.completions.create(model="wisp-demo", prompt="x", max_tokens=200, stream=True,
                                       extra_body={"ignore_eos": True}) as stream:
            next(iter(stream))
            with pytest.raises(openai.RateLimitError) as excinfo:
                client.completions.create(model="wisp-demo", prompt="y", max_tokens=2)
            assert excinfo.value.response.headers["retry-after"] == "1"
        health = httpx.get(handle.url.removesuffix("/v1") + "/health").json()
        assert health["status"] == "ok"
    finally:
        handle.stop()
