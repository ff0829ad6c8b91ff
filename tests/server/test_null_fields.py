"""Every optional field of every body: an explicit null is its default (the openai SDK sends null for a None
argument), and any JSON value at all is a 200 or a 4xx naming the problem, never a 500."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.server.app import create_app  # noqa: E402
from engine.server.schemas import ChatCompletionRequest, CompletionRequest  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
COMPLETION = {"prompt": "Hi", "max_tokens": 4}
OLLAMA_CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": False}
OLLAMA_OPTIONS = ["temperature", "top_p", "top_k", "min_p", "seed", "repeat_penalty", "presence_penalty",
                  "frequency_penalty", "num_predict", "stop", "logit_bias", "num_ctx", "mirostat"]


def optional_fields(model) -> list[str]:
    return sorted(name for name, field in model.model_fields.items() if not field.is_required())


CASES = ([("/v1/chat/completions", CHAT, name) for name in optional_fields(ChatCompletionRequest)]
         + [("/v1/completions", COMPLETION, name) for name in optional_fields(CompletionRequest)])
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=6)


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(ScriptedEngine([("Hello", "")])), base_url="http://127.0.0.1") as client:
        yield client


def post(client, path: str, body: dict):
    return client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})


@pytest.mark.parametrize("path, body, name", CASES, ids=[f"{p.split('/')[-1]}.{n}" for p, _, n in CASES])
def test_null_is_the_default(client, path, body, name):
    response = post(client, path, {**body, name: None})
    assert response.status_code == 200, response.json()


@pytest.mark.parametrize("name", OLLAMA_OPTIONS)
def test_a_null_ollama_option_is_ollamas_default(client, name):
    engine = client.app.state.bridge.engine
    response = post(client, "/api/chat", {**OLLAMA_CHAT, "options": {name: None}})
    assert response.status_code == 200, response.json()
    if name == "temperature":
        assert engine.requests[-1].sampling.temperature == 0.8


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(CASES + [("/api/chat", OLLAMA_CHAT, f"options.{name}") for name in OLLAMA_OPTIONS]
                            + [("/api/chat", OLLAMA_CHAT, name) for name in ("format", "think", "tools", "stream",
                                                                               "options", "keep_alive")]),
       value=JSON_VALUES)
def test_any_json_value_in_any_optional_field_is_answered_without_a_server_error(client, case, value):
    path, body, name = case
    if name.startswith("options."):
        body = {**body, "options": {name.removeprefix("options."): value}}
    else:
        body = {**body, name: value}
    response = post(client, path, body)
    assert response.status_code < 500, (body, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error if path.startswith("/api") else error["message"]
