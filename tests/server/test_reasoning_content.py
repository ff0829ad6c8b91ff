"""A reasoning model behind the OpenAI-compatible server: the reasoning comes back in `reasoning_content`
(message and stream deltas), never inside `content`."""

import json

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.server.app import create_app  # noqa: E402
from tests.scripted_engine import REASONING_REPLY, ScriptedEngine  # noqa: E402

BODY = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16}


@pytest.fixture
def client():
    with TestClient(create_app(ScriptedEngine(REASONING_REPLY)), base_url="http://127.0.0.1") as client:
        yield client


def test_the_message_carries_reasoning_content_apart_from_content(client):
    message = client.post("/v1/chat/completions", json=BODY).json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Hello there!",
                       "reasoning_content": "The user greets me. Reply briefly."}


def test_stream_deltas_carry_reasoning_content_then_content(client):
    with client.stream("POST", "/v1/chat/completions", json={**BODY, "stream": True}) as response:
        lines = [line.removeprefix("data: ") for line in response.iter_lines() if line.startswith("data: ")]
    deltas = [json.loads(line)["choices"][0]["delta"] for line in lines[:-1]]
    reasoning = "".join(delta.get("reasoning_content", "") for delta in deltas)
    content = "".join(delta.get("content", "") for delta in deltas)
    assert (reasoning, content, lines[-1]) == ("The user greets me. Reply briefly.", "Hello there!", "[DONE]")


def test_a_model_without_reasoning_has_no_reasoning_field():
    with TestClient(create_app(ScriptedEngine([("Hi", "")])), base_url="http://127.0.0.1") as client:
        message = client.post("/v1/chat/completions", json=BODY).json()["choices"][0]["message"]
    assert message == {"role": "assistant", "content": "Hi"}


def test_the_remote_backend_reads_reasoning_content_back():
    from engine.api import Engine, EngineOptions, GenerateRequest, TokenEvent
    from engine.backends.remote import using_api_key
    from engine.server import start_server

    server = start_server(ScriptedEngine(REASONING_REPLY), "127.0.0.1", 0, api_key="key")
    try:
        with using_api_key("key"), Engine(EngineOptions(model=server.url)) as remote:
            handle = remote.submit(GenerateRequest(messages=tuple(BODY["messages"])))
            tokens = [event for event in handle if isinstance(event, TokenEvent)]
    finally:
        server.stop()
    assert (handle.finish.text, handle.finish.reasoning) == ("Hello there!", "The user greets me. Reply briefly.")
    assert "".join(token.reasoning for token in tokens) == handle.finish.reasoning


def test_reasoning_options_reach_the_engine_and_bad_ones_are_400s():
    engine = ScriptedEngine(REASONING_REPLY)
    no_thinking = {"chat_template_kwargs": {"enable_thinking": False}}
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        assert client.post("/v1/chat/completions", json={**BODY, "reasoning_effort": "high"}).status_code == 200
        assert client.post("/v1/chat/completions", json={**BODY, **no_thinking}).status_code == 200
        assert client.post("/v1/chat/completions", json=BODY).status_code == 200
        for field, bad, param in (("reasoning_effort", "extreme", "reasoning_effort"),
                                  ("reasoning_effort", 3, "reasoning_effort"),
                                  ("reasoning_effort", ["low"], "reasoning_effort"),
                                  ("chat_template_kwargs", {"enable_thinking": "no"},
                                   "chat_template_kwargs.enable_thinking"),
                                  ("chat_template_kwargs", {"tools_in_user_message": True},
                                   "chat_template_kwargs.tools_in_user_message"),
                                  ("chat_template_kwargs", [1], "chat_template_kwargs")):
            response = client.post("/v1/chat/completions", json={**BODY, field: bad})
            assert response.status_code == 400 and response.json()["error"]["param"] == param, (field, bad)
    assert [request.reasoning_effort for request in engine.requests] == ["high", None, None]
    assert [request.enable_thinking for request in engine.requests] == [None, False, None]


def test_the_remote_backend_sends_the_reasoning_options_on():
    from engine.api import Engine, EngineOptions, GenerateRequest
    from engine.server import start_server

    served = ScriptedEngine(REASONING_REPLY)
    server = start_server(served, "127.0.0.1", 0)
    try:
        with Engine(EngineOptions(model=server.url)) as remote:
            assert remote.info.reasoning_effort and remote.info.thinking_switch  # the server decides for itself
            remote.generate(GenerateRequest(messages=tuple(BODY["messages"]), reasoning_effort="low"))
            remote.generate(GenerateRequest(messages=tuple(BODY["messages"]), enable_thinking=False))
            remote.generate(GenerateRequest(messages=tuple(BODY["messages"])))
    finally:
        server.stop()
    assert [request.reasoning_effort for request in served.requests] == ["low", None, None]
    assert [request.enable_thinking for request in served.requests] == [None, False, None]


def test_a_server_without_extensions_is_not_sent_a_thinking_switch():
    from engine.api import GenerateRequest
    from engine.backends.remote import request_body
    from engine.errors import RequestError

    request = GenerateRequest(messages=tuple(BODY["messages"]), enable_thinking=False)
    assert request_body(request, "m", True)[1]["chat_template_kwargs"] == {"enable_thinking": False}
    with pytest.raises(RequestError, match="chat_template_kwargs"):
        request_body(request, "m", False)
