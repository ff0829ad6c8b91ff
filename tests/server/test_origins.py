"""No web page but those on this machine or named by --cors may make the model generate: a foreign Origin on
any route that changes state (OpenAI's and Ollama's) is a 403, whatever its Content-Type."""

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.server.app import create_app  # noqa: E402
from engine.server.limits import ServerLimits  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402

OLLAMA = ('{"model": "m", "prompt": "Hi", "stream": false}', "/api/generate")
OLLAMA_CHAT = ('{"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": false}', "/api/chat")
OPENAI = ('{"messages": [{"role": "user", "content": "Hi"}]}', "/v1/chat/completions")


def post(origin: str | None, body_and_path: tuple[str, str], content_type: str = "application/json",
         cors: tuple[str, ...] = ()):
    engine = ScriptedEngine([("Hello", "")])
    headers = {"Content-Type": content_type, **({"Origin": origin} if origin else {})}
    with TestClient(create_app(engine, limits=ServerLimits(cors_origins=cors)),
                    base_url="http://127.0.0.1") as client:
        body, path = body_and_path
        return client.post(path, content=body, headers=headers), engine


@pytest.mark.parametrize("route", [OLLAMA, OLLAMA_CHAT, OPENAI])
@pytest.mark.parametrize("content_type", ["text/plain", "application/json"])
def test_a_foreign_page_is_refused_before_anything_runs(route, content_type):
    response, engine = post("https://evil.example", route, content_type)
    assert response.status_code == 403 and engine.requests == []
    error = response.json()["error"]
    message = error if route[1].startswith("/api") else error["message"]
    assert "evil.example" in message and "--cors" in message


@pytest.mark.parametrize("origin", ["http://localhost:3000", "http://127.0.0.1:8080", "http://[::1]:5173",
                                    "https://app.localhost"])
@pytest.mark.parametrize("route", [OLLAMA, OPENAI])
def test_pages_on_this_machine_are_answered(origin, route):
    response, engine = post(origin, route)
    assert response.status_code == 200 and len(engine.requests) == 1


@pytest.mark.parametrize("route", [OLLAMA, OPENAI])
def test_the_cors_list_admits_its_origins_on_every_route(route):
    assert post("https://chat.example", route, cors=("https://chat.example",))[0].status_code == 200
    assert post("https://other.example", route, cors=("https://chat.example",))[0].status_code == 403


@pytest.mark.parametrize("origin", ["null", "file://", "http://localhost.evil.example", "http://127.0.0.1.nip.io"])
def test_origins_that_only_look_local_are_foreign(origin):
    assert post(origin, OLLAMA)[0].status_code == 403


def test_reading_is_not_changing_state():
    with TestClient(create_app(ScriptedEngine([])), base_url="http://127.0.0.1") as client:
        assert client.get("/api/tags", headers={"Origin": "https://evil.example"}).status_code == 200
