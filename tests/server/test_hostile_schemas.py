"""Schemas and values that used to reach a traceback: a JSON schema sent as text nested hundreds deep, Ollama's
logit_bias of the wrong type, an image part; each is a 400 that says what to change."""

import json

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.errors import RequestError  # noqa: E402
from engine.sampling import SamplingParams  # noqa: E402
from engine.server.app import create_app  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402

ASK = [{"role": "user", "content": "Hi"}]


def deep_schema(levels: int) -> str:
    return '{"type": "array", "items": ' * levels + '{"type": "string"}' + "}" * levels


@pytest.fixture
def client():
    with TestClient(create_app(ScriptedEngine([("Hello", "")])), base_url="http://127.0.0.1") as client:
        yield client


@pytest.mark.parametrize("levels", [100, 900, 5000])
@pytest.mark.parametrize("field", ["guided_json", "json_schema"])
def test_a_schema_as_text_nested_deep_is_a_400(client, field, levels):
    response = client.post("/v1/chat/completions", json={"messages": ASK, field: deep_schema(levels)})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == field and "nests deeper" in response.json()["error"]["message"]


def test_the_engine_refuses_a_deep_schema_where_it_enters():
    with pytest.raises(RequestError, match="nests deeper"):
        SamplingParams(json_schema=deep_schema(900))


@pytest.mark.parametrize("bias", ["50256:-100", [[1, 2]], 5, True])
def test_ollama_logit_bias_of_the_wrong_type_is_a_400(client, bias):
    body = {"model": "m", "prompt": "Hi", "stream": False, "options": {"logit_bias": bias}}
    response = client.post("/api/generate", json=body)
    assert response.status_code == 400 and "logit_bias" in response.json()["error"]


@pytest.mark.parametrize("part, kind", [
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, "image"),
    ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, "audio"),
    ({"type": "file", "file": {"file_id": "f"}}, "file"),
])
def test_an_image_part_says_the_model_reads_text_only(client, part, kind):
    messages = [{"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}]
    response = client.post("/v1/chat/completions", json={"messages": messages})
    error = response.json()["error"]
    assert response.status_code == 400 and error["param"] == "messages.0.content.1"
    assert f"does not take {kind}" in error["message"] and "valid string" not in error["message"]


def test_text_parts_still_join(client):
    messages = [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert client.post("/v1/chat/completions", json={"messages": messages}).status_code == 200
    assert client.app.state.bridge.engine.requests[-1].messages[0]["content"] == "ab"


def test_a_body_with_both_content_length_and_transfer_encoding_closes_the_connection():
    import socket

    from engine.server import start_server
    server = start_server(ScriptedEngine([("Hello", "")]), "127.0.0.1", 0)
    try:
        host, port = server.url.removeprefix("http://").removesuffix("/v1").split(":")
        body = json.dumps({"messages": ASK}).encode()
        chunked = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
        head = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(head + chunked)
            received = b""
            while chunk := sock.recv(65536):
                received += chunk
        assert received.startswith(b"HTTP/1.1 400") and b"not both" in received
    finally:
        server.stop()
