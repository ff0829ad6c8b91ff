"""What the desktop app's "serve this model" toggle calls: start_server on an already-loaded engine,
in a background thread, with a URL to copy; stop() leaves the engine loaded."""

import time

import httpx
import openai
import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import WispError
from engine.server import start_server
from tests.server.conftest import is_idle, wait_until


def test_toggle_serves_the_loaded_engine_and_stops():
    with Engine(EngineOptions(model=None, device="cpu")) as engine:
        handle = start_server(engine, "127.0.0.1", 0)
        assert handle.url == f"http://127.0.0.1:{handle.port}/v1" and handle.is_running
        client = openai.OpenAI(base_url=handle.url, api_key="unused", max_retries=0)
        served = client.completions.create(model="wisp-demo", prompt="def fib(n):", max_tokens=8, temperature=0)
        rebinding = httpx.get(handle.url + "/models", headers={"Host": "attacker.example:8000"})
        assert rebinding.status_code == 400 and rebinding.json()["error"]["code"] == "invalid_host"
        handle.stop()
        assert not handle.is_running
        with pytest.raises(openai.APIConnectionError):
            client.models.list()
        local = engine.generate(GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=8)))
        assert served.choices[0].text == local.text

        again = start_server(engine, "127.0.0.1", 0)
        try:
            engine.close()
            closed = openai.OpenAI(base_url=again.url, api_key="unused", max_retries=0)
            with pytest.raises(openai.APIStatusError) as excinfo:
                closed.completions.create(model="wisp-demo", prompt="x", max_tokens=2)
            assert excinfo.value.status_code == 503
        finally:
            again.stop()


def test_stopping_with_an_open_stream_ends_it_and_frees_the_engine(demo_engine):
    handle = start_server(demo_engine, "127.0.0.1", 0)
    client = openai.OpenAI(base_url=handle.url, api_key="unused", max_retries=0)
    stream = client.completions.create(model="wisp-demo", prompt="x", max_tokens=500, stream=True,
                                       extra_body={"ignore_eos": True})
    next(iter(stream))
    started = time.monotonic()
    handle.stop()
    assert time.monotonic() - started < 2.0 and not handle.is_running
    with pytest.raises(openai.APIError, match="stopping"):
        list(stream)
    assert wait_until(lambda: is_idle(demo_engine), 2.0)


def test_open_host_without_key_is_refused_before_binding():
    with pytest.raises(WispError, match="--api-key"):
        start_server(object(), "0.0.0.0", 0)
