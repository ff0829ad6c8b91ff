"""Ollama's API beside OpenAI's, through the official `ollama` Python client against a real server on loopback:
the model list, show, ps, version, chat and generate (streamed NDJSON and whole), options, format, any name."""

import json

import httpx
import pytest

from engine.api import GenerateRequest, SamplingParams
from tests.server.conftest import API_KEY

ollama = pytest.importorskip("ollama")
CHAT = [{"role": "user", "content": "Name a colour."}]


@pytest.fixture
def ollama_client(server):
    return ollama.Client(host=server.url.removesuffix("/v1"), headers={"Authorization": f"Bearer {API_KEY}"})


def test_the_model_is_listed_shown_and_running(ollama_client):
    (model,) = ollama_client.list().models
    assert model.model == "wisp-demo:latest"
    shown = ollama_client.show("wisp-demo")
    assert "completion" in shown.capabilities and "im_start" in shown.template
    assert [m.model for m in ollama_client.ps().models] == ["wisp-demo:latest"]


def test_version_answers_without_a_body(server):
    response = httpx.get(server.url.removesuffix("/v1") + "/api/version",
                         headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200 and response.json()["version"]


def test_chat_streamed_equals_chat_whole_and_openais_answer(ollama_client, client):
    options = {"temperature": 0, "num_predict": 16}
    whole = ollama_client.chat(model="wisp-demo", messages=CHAT, options=options)
    parts = list(ollama_client.chat(model="anything-at-all", messages=CHAT, options=options, stream=True))
    assert "".join(p.message.content for p in parts) == whole.message.content
    assert parts[-1].done and parts[-1].eval_count == whole.eval_count and parts[-1].done_reason == whole.done_reason
    openai_answer = client.chat.completions.create(model="wisp-demo", messages=CHAT, max_tokens=16, temperature=0)
    assert whole.message.content == openai_answer.choices[0].message.content


def test_generate_with_options_equals_the_engine(ollama_client, demo_engine):
    options = {"temperature": 0.7, "top_k": 20, "top_p": 0.9, "min_p": 0.05, "seed": 4, "repeat_penalty": 1.2,
               "num_predict": 12, "presence_penalty": 0.3}
    answer = ollama_client.generate(model="wisp-demo", prompt="def fib(n):", raw=True, options=options)
    sampling = SamplingParams(max_tokens=12, temperature=0.7, top_k=20, top_p=0.9, min_p=0.05, seed=4,
                              repetition_penalty=1.2, presence_penalty=0.3)
    direct = demo_engine.generate(GenerateRequest(prompt="def fib(n):", sampling=sampling))
    assert answer.response == direct.text and answer.prompt_eval_count == direct.stats.prompt_tokens
    streamed = "".join(part.response for part in ollama_client.generate(model="wisp-demo", prompt="def fib(n):",
                                                                         raw=True, options=options, stream=True))
    assert streamed == direct.text


def test_format_schema_gives_parsable_json(ollama_client):
    schema = {"type": "object", "properties": {"colour": {"type": "string", "maxLength": 12}},
              "required": ["colour"], "additionalProperties": False}
    answer = ollama_client.chat(model="wisp-demo", messages=CHAT, format=schema, options={"temperature": 0.5,
                                                                                         "seed": 1})
    assert isinstance(json.loads(answer.message.content)["colour"], str)


def test_errors_are_ollamas_shape(ollama_client, server):
    with pytest.raises(ollama.ResponseError) as excinfo:
        ollama_client.chat(model="wisp-demo", messages=CHAT, options={"mirostat": 2})
    assert excinfo.value.status_code == 400 and "mirostat" in excinfo.value.error
    response = httpx.post(server.url.removesuffix("/v1") + "/api/chat", json={"messages": CHAT})
    assert response.status_code == 401  # the key guards /api as it guards /v1


def test_ignored_options_are_named_in_the_warning_header(server):
    body = {"model": "wisp-demo", "prompt": "def f(", "raw": True, "stream": False,
            "options": {"num_ctx": 4096, "num_predict": 4, "repeat_last_n": 64}}
    response = httpx.post(server.url.removesuffix("/v1") + "/api/generate", json=body,
                          headers={"Authorization": f"Bearer {API_KEY}"})
    assert response.status_code == 200 and response.json()["done"] is True
    assert "options.num_ctx" in response.headers["warning"] and "options.repeat_last_n" in response.headers["warning"]
