"""Forced tool calls whose parameters are what pydantic writes ($defs and $ref), several calls where the model
makes several, and schemas that refer to themselves without nesting: a 400, not an empty reply."""

import json

import pytest
import torch

pytest.importorskip("starlette")
pytest.importorskip("llguidance")
jsonschema = pytest.importorskip("jsonschema")

from starlette.testclient import TestClient  # noqa: E402

import engine.runtime.llm_engine as llm_engine  # noqa: E402
from engine.api import Engine, EngineOptions  # noqa: E402
from engine.server.app import create_app  # noqa: E402
from engine.text.tokenizer import Tokenizer  # noqa: E402
from tests.generation.tool_fixtures import WEATHER, write_tool_model  # noqa: E402

ASK = [{"role": "user", "content": "Send it to Paris."}]
ADDRESS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                            "zone": {"$ref": "#/$defs/Zone"}}, "required": ["city", "zone"]}
SHIP = {"type": "function", "function": {"name": "ship", "parameters": {  # pydantic's shape for nested models
    "$defs": {"Address": ADDRESS, "Zone": {"enum": ["A", "B"]}},
    "type": "object", "properties": {"to": {"$ref": "#/$defs/Address"}}, "required": ["to"]}}}
FIRST_CALL = '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris"}}\n</tool_call>'  # compact JSON
SECOND_CALL = '<tool_call>\n{"name":"get_weather","arguments":{"city":"Rome"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    return write_tool_model(tmp_path_factory.mktemp("tool_schemas_model"))


@pytest.fixture(scope="module")
def client(tool_model):
    with Engine(EngineOptions(model=str(tool_model), device="cpu")) as engine, \
            TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        yield client


@pytest.mark.parametrize("tool_choice", ["required", {"type": "function", "function": {"name": "ship"}}])
def test_forced_calls_follow_parameters_that_use_defs_and_refs(client, tool_choice):
    body = {"messages": ASK, "tools": [SHIP], "tool_choice": tool_choice, "max_tokens": 120, "temperature": 1.0}
    for seed in range(2):
        response = client.post("/v1/chat/completions", json={**body, "seed": seed})
        assert response.status_code == 200, response.json()
        choice = response.json()["choices"][0]
        if choice["finish_reason"] == "length":
            continue  # a random tiny model may write the longest string the schema allows, and more
        (call,) = choice["message"]["tool_calls"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), SHIP["function"]["parameters"])


@pytest.mark.parametrize("schema", [{"$ref": "#"}, {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                                                    "$ref": "#/$defs/a"}])
def test_a_schema_that_only_refers_to_itself_is_a_400(client, schema):
    response_format = {"type": "json_schema", "json_schema": {"name": "loop", "schema": schema}}
    response = client.post("/v1/chat/completions", json={"messages": ASK, "response_format": response_format})
    assert response.status_code == 400 and "refers to itself" in response.json()["error"]["message"]


def test_a_recursive_schema_that_nests_is_fine(client):
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
            "required": ["kids"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "tree", "schema": tree}}
    response = client.post("/v1/chat/completions", json={"messages": ASK, "response_format": response_format,
                                                         "max_tokens": 40})
    assert response.status_code == 200, response.json()


@pytest.mark.slow
@pytest.mark.parametrize("parallel, names", [(None, ["get_weather", "get_weather"]), (False, ["get_weather"])])
def test_required_with_parallel_calls_yields_each_call_the_model_makes(client, tool_model, monkeypatch, parallel,
                                                                       names):
    tokenizer = Tokenizer.from_folder(tool_model)
    reply = tokenizer.encode(FIRST_CALL + "\n" + SECOND_CALL, add_special_tokens=False)
    script = iter(reply + [tokenizer.token_to_id("<|im_end|>")])
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(script)]), torch.tensor([-1.0])))
    body = {"messages": ASK, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 200,
            "parallel_tool_calls": parallel}
    choice = client.post("/v1/chat/completions", json=body).json()["choices"][0]
    assert [call["function"]["name"] for call in choice["message"]["tool_calls"]] == names
    assert choice["finish_reason"] == "tool_calls"
