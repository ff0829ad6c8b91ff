"""One default per surface and one range for all (issue 49): the engine and CLI sample greedily, OpenAI's routes
default to OpenAI's 1.0, Ollama's to Ollama's 0.8; a temperature above 2 is refused the same way everywhere,
by the one check in engine.sampling_checks."""

import pytest

pytest.importorskip("starlette")

from starlette.testclient import TestClient  # noqa: E402

from engine.errors import RequestError  # noqa: E402
from engine.sampling import OLLAMA_DEFAULTS, OPENAI_DEFAULTS, SamplingParams  # noqa: E402
from engine.sampling_checks import MAX_TEMPERATURE  # noqa: E402
from engine.server.app import create_app  # noqa: E402
from tests.scripted_engine import ScriptedEngine  # noqa: E402

CHAT = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
OLLAMA = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "stream": False}


@pytest.fixture
def client():
    with TestClient(create_app(ScriptedEngine([("Hello", "")])), base_url="http://127.0.0.1") as client:
        yield client


def sent(client):
    return client.app.state.bridge.engine.requests[-1].sampling


def test_each_surface_has_its_stated_default(client):
    assert SamplingParams().temperature == 0.0 and SamplingParams().is_greedy
    assert client.post("/v1/chat/completions", json=CHAT).status_code == 200
    assert (sent(client).temperature, sent(client).top_p) == (1.0, 1.0) == tuple(OPENAI_DEFAULTS.values())
    assert client.post("/api/chat", json=OLLAMA).status_code == 200
    assert (sent(client).temperature, sent(client).top_p, sent(client).top_k) == tuple(OLLAMA_DEFAULTS.values())


@pytest.mark.parametrize("temperature", [MAX_TEMPERATURE + 0.01, 5, 100])
def test_one_range_for_every_surface(client, temperature):
    with pytest.raises(RequestError, match="temperature must be between 0 and 2"):
        SamplingParams(temperature=temperature)
    openai = client.post("/v1/chat/completions", json={**CHAT, "temperature": temperature}).json()["error"]
    ollama = client.post("/api/chat", json={**OLLAMA, "options": {"temperature": temperature}}).json()["error"]
    assert openai["param"] == "temperature" and "between 0 and 2" in openai["message"]
    assert "between 0 and 2" in ollama


@pytest.mark.parametrize("top_k, expected", [(-1, 0), (0, 0), (7, 7)])
def test_top_k_minus_one_is_vllms_spelling_of_off(client, top_k, expected):
    assert client.post("/v1/chat/completions", json={**CHAT, "top_k": top_k}).status_code == 200
    assert sent(client).top_k == expected


def test_top_k_below_minus_one_is_refused(client):
    assert client.post("/v1/chat/completions", json={**CHAT, "top_k": -2}).json()["error"]["param"] == "top_k"
