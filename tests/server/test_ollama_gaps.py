"""Ollama's protocol where clients lean on it: the empty-messages load request, {"error": "..."} for every /api
error, the model's real size in /api/tags, and embeddings answered 501 (not 404) on both APIs."""

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.server.app import create_app  # noqa: E402
from engine.server.model_size import parameter_size  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402


@pytest.fixture
def scripted():
    engine = ScriptedEngine([("Hello", "")])
    with TestClient(create_app(engine), base_url="http://127.0.0.1") as client:
        yield client, engine


def test_empty_messages_load_the_model(scripted):
    client, engine = scripted
    reply = client.post("/api/chat", json={"model": "m", "messages": []})
    assert reply.status_code == 200 and engine.requests == []
    body = reply.json()
    assert (body["done"], body["done_reason"], body["message"]) == (True, "load", {"role": "assistant",
                                                                                    "content": ""})


@pytest.mark.parametrize("method, path", [("GET", "/api/nothing"), ("POST", "/api/pull"), ("GET", "/api/chat"),
                                          ("DELETE", "/api/delete")])
def test_unknown_api_routes_answer_in_ollamas_shape(scripted, method, path):
    response = scripted[0].request(method, path)
    assert response.status_code in (404, 405)
    assert isinstance(response.json()["error"], str) and path in response.json()["error"]


def test_unknown_openai_routes_keep_openais_shape(scripted):
    assert scripted[0].get("/v1/nothing").json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/api/embed", "/api/embeddings"])
def test_ollama_embeddings_are_not_supported(scripted, path):
    response = scripted[0].post(path, json={"model": "m", "input": "hello"})
    assert response.status_code == 501 and "embeddings are not supported" in response.json()["error"]


def test_openai_embeddings_are_not_supported(scripted):
    response = scripted[0].post("/v1/embeddings", json={"model": "m", "input": "hello"})
    assert response.status_code == 501
    assert "embeddings are not supported" in response.json()["error"]["message"]


def test_tags_report_the_demo_models_size_and_parameters(demo_engine):
    with TestClient(create_app(demo_engine), base_url="http://127.0.0.1") as client:
        (card,) = client.get("/api/tags").json()["models"]
    from engine.loading.model_path import DEMO_MODEL
    assert card["size"] >= (DEMO_MODEL / "model.safetensors").stat().st_size > 0
    assert card["details"]["parameter_size"][-1] in "KMB" and float(card["details"]["parameter_size"][:-1]) > 0


@pytest.mark.parametrize("count, text", [(0, ""), (999, "999"), (7_600_000, "7.6M"), (30_500_000_000, "30.5B")])
def test_parameter_sizes_read_as_ollama_writes_them(count, text):
    assert parameter_size(count) == text
