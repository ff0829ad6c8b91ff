"""Function calling through the OpenAI-compatible server: tools go to the chat template, the calls come back in
`tool_calls` (finish_reason "tool_calls", content null), whole and streamed, and the next turn's assistant calls
and tool replies reach the template. What Wisp cannot do is a 400 naming the field."""

import json

import pytest
import torch

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

import engine.runtime.llm_engine as llm_engine  # noqa: E402
from engine.api import Engine, EngineOptions  # noqa: E402
from engine.events import ToolCall  # noqa: E402
from engine.server.app import create_app  # noqa: E402
from engine.text.tokenizer import Tokenizer  # noqa: E402
from tests.generation.tool_fixtures import CALL_REPLY, WEATHER, write_tool_model  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402

ASK = [{"role": "user", "content": "Weather in Paris?"}]
BODY = {"messages": ASK, "tools": [WEATHER], "max_tokens": 60}
PARIS = ToolCall("get_weather", '{"city": "Paris"}')


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    return write_tool_model(tmp_path_factory.mktemp("server_tool_model"))


def test_a_real_engine_answers_with_tool_calls(tool_model, monkeypatch):
    tokenizer = Tokenizer.from_folder(tool_model)
    reply = tokenizer.encode(CALL_REPLY, add_special_tokens=False) + [tokenizer.token_to_id("<|im_end|>")]
    script = iter(reply * 2)
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(script)]), torch.tensor([-1.0])))
    with Engine(EngineOptions(model=str(tool_model), device="cpu")) as engine, \
            TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        choice = client.post("/v1/chat/completions", json=BODY).json()["choices"][0]
        with client.stream("POST", "/v1/chat/completions", json={**BODY, "stream": True}) as response:
            chunks = [json.loads(line.removeprefix("data: ")) for line in response.iter_lines()
                      if line.startswith("data: {")]
    call = choice["message"]["tool_calls"][0]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert (choice["message"]["content"], choice["finish_reason"]) == (None, "tool_calls")
    deltas = [chunk["choices"][0] for chunk in chunks if chunk["choices"]]
    streamed = [call for delta in deltas for call in delta["delta"].get("tool_calls", [])]
    assert (streamed[0]["index"], streamed[0]["function"]) == (0, {"name": "get_weather", "arguments": ""})
    assert streamed[0]["id"].startswith("call_") and all(c["index"] == 0 and "id" not in c for c in streamed[1:])
    assert len(streamed) > 2 and "".join(c["function"]["arguments"] for c in streamed) == '{"city": "Paris"}'
    assert "".join(d["delta"].get("content", "") for d in deltas) == ""
    assert deltas[-1]["finish_reason"] == "tool_calls"


FORECAST = {"type": "function", "function": {"name": "forecast", "parameters": {
    "type": "object", "properties": {"unit": {"enum": ["C", "F"]}, "days": {"type": "integer", "minimum": 1,
                                                                            "maximum": 7}},
    "required": ["unit", "days"], "additionalProperties": False}}}


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "forecast"}}])
def test_a_required_or_named_tool_choice_makes_the_call_with_arguments_held_to_the_schema(tool_model, tool_choice):
    body = {**BODY, "tools": [FORECAST], "tool_choice": tool_choice, "max_tokens": 80, "temperature": 1.0}
    with Engine(EngineOptions(model=str(tool_model), device="cpu")) as engine, \
            TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        for seed in range(3):
            choice = client.post("/v1/chat/completions", json={**body, "seed": seed}).json()["choices"][0]
            (call,) = choice["message"]["tool_calls"]
            assert choice["finish_reason"] == "tool_calls"
            arguments = json.loads(call["function"]["arguments"])
            assert call["function"]["name"] == "forecast"
            assert arguments["unit"] in ("C", "F") and 1 <= arguments["days"] <= 7


def test_the_next_turn_carries_the_call_and_the_tool_reply():
    engine = ScriptedEngine([("Sunny.", "")])
    turn = [*ASK, {"role": "assistant", "content": None,
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"}]
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        message = client.post("/v1/chat/completions", json={**BODY, "messages": turn}).json()["choices"][0]["message"]
        assert client.post("/v1/chat/completions", json={**BODY, "tool_choice": "none"}).status_code == 200
    assert message == {"role": "assistant", "content": "Sunny."}
    sent = engine.requests[0]
    assert sent.tools == (WEATHER,) and engine.requests[1].tools is None
    assert sent.messages[1] == {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
    assert sent.messages[2] == {"role": "tool", "content": "18 C, sunny", "tool_call_id": "call_1"}


def test_the_openai_client_reads_the_calls():
    openai = pytest.importorskip("openai")
    from engine.server import start_server

    server = start_server(ScriptedEngine([], tool_calls=(PARIS,)), "127.0.0.1", 0, api_key="key")
    try:
        client = openai.OpenAI(base_url=server.url, api_key="key", max_retries=0)
        completion = client.chat.completions.create(model="scripted", messages=ASK, tools=[WEATHER])
    finally:
        server.stop()
    call = completion.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    assert completion.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("change, param", [
    ({"tool_choice": {"type": "function", "function": {"name": "no_such_tool"}}}, "tool_choice"),
    ({"tool_choice": {"type": "function"}}, "tool_choice"),
    ({"tools": [{"type": "function"}]}, "tools.0"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"x": "\ud800"}}}]}, "tools.0"),
    ({"functions": [{"name": "f"}]}, "functions"),
    ({"messages": [{"role": "user"}]}, "messages.0.content"),
    ({"messages": [{"role": "user", "content": "x", "tool_calls": [
        {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]}, "messages.0.tool_calls"),
    ({"messages": [*ASK, {"role": "tool", "content": "18 C"}]}, "messages.1.tool_call_id"),
    ({"messages": [{"role": "function", "content": "x"}]}, "messages.0.role"),
])
def test_what_wisp_cannot_do_is_a_400_naming_the_field(change, param):
    with TestClient(create_app(ScriptedEngine([("x", "")])), base_url="http://127.0.0.1") as client:
        response = client.post("/v1/chat/completions", content=json.dumps({**BODY, **change}),  # \ud800 escaped
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"]["param"] == param, response.json()


def test_tools_are_not_sent_on_to_a_remote_server():
    from engine.api import GenerateRequest
    from engine.backends.remote import request_body
    from engine.errors import RequestError

    with pytest.raises(RequestError, match="remote"):
        request_body(GenerateRequest(messages=tuple(ASK), tools=(WEATHER,)), "m", True)
