"""The remote backend against `wisp serve` itself on loopback: same greedy tokens as the local engine,
requests interleave, cancel closes the stream, and bad URLs or keys are readable errors."""

import json

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, TokenEvent
from engine.backends.remote import split_target, using_api_key
from engine.cli import main
from engine.errors import WispError
from tests.server.conftest import API_KEY, is_idle, wait_until


def requests(max_tokens: int = 20) -> list[GenerateRequest]:
    sampling = SamplingParams(max_tokens=max_tokens)
    return [GenerateRequest(prompt="def fib(n):", sampling=sampling),
            GenerateRequest(messages=({"role": "user", "content": "What is a decorator?"},), sampling=sampling),
            GenerateRequest(prompt="import json\n", sampling=SamplingParams(max_tokens=max_tokens, stop=("\n\n",)))]


@pytest.fixture(scope="module")
def remote_engine(server):
    with using_api_key(API_KEY):
        engine = Engine(EngineOptions(model=server.url))
    yield engine
    engine.close()


def test_remote_engine_describes_the_served_model(remote_engine):
    info = remote_engine.info
    assert info.name == "wisp-demo" and info.model_type == "remote" and info.max_model_len == 2048


def test_remote_greedy_output_equals_local_token_for_token(remote_engine, demo_engine):
    local = [demo_engine.generate(request) for request in requests()]
    remote = [handle.result() for handle in remote_engine.submit_batch(requests())]  # batched on the server
    for far, near in zip(remote, local):
        assert (far.text, far.token_ids, far.reason) == (near.text, near.token_ids, near.reason)
        assert far.stats.prompt_tokens == near.stats.prompt_tokens
        # fp32 CPU matmuls round differently for a batch of 3 than for 1 (tokens agree, last bits may not)
        assert far.logprobs == pytest.approx(near.logprobs, abs=1e-4)
    alone = remote_engine.generate(requests()[0])
    assert alone.logprobs == local[0].logprobs


def test_remote_streams_token_events(remote_engine):
    handle = remote_engine.submit(requests()[0])
    events = list(handle)
    tokens = [event for event in events if isinstance(event, TokenEvent)]
    assert len(tokens) == 20 and "".join(t.text for t in tokens) == handle.finish.text[:len("".join(t.text for t in tokens))]


def test_cancelling_a_remote_request_frees_the_server_sequence(remote_engine, demo_engine):
    long = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=500, ignore_eos=True))
    handle = remote_engine.submit(long)
    next(event for event in handle if isinstance(event, TokenEvent))
    remote_engine.cancel(long.request_id)
    assert handle.result().reason == "cancelled"
    assert wait_until(lambda: is_idle(demo_engine), 5.0)


def test_wisp_run_on_a_url_prints_what_it_prints_locally(server, capsys):
    args = ["run", "--prompt", "def fib(n):", "--max-tokens", "16", "--json"]
    capsys.readouterr()
    assert main([*args, server.url, "--api-key", API_KEY]) == 0
    far = json.loads(capsys.readouterr().out)
    assert main([*args, "--device", "cpu"]) == 0
    near = json.loads(capsys.readouterr().out)
    assert (far["text"], far["token_ids"], far["logprobs"]) == (near["text"], near["token_ids"], near["logprobs"])


def test_wrong_key_unknown_model_and_dead_port_are_readable_errors(server, capsys):
    with using_api_key("wrong"), pytest.raises(WispError, match="refused the API key"):
        Engine(EngineOptions(model=server.url))
    with using_api_key(API_KEY), pytest.raises(WispError, match="does not serve 'other'"):
        Engine(EngineOptions(model=server.url + "#other"))
    capsys.readouterr()
    assert main(["run", "http://127.0.0.1:9/v1", "--prompt", "x"]) == 2
    assert "cannot reach http://127.0.0.1:9/v1" in capsys.readouterr().err


def test_split_target():
    assert split_target("http://h:8000") == ("http://h:8000/v1", None)
    assert split_target("https://h/v1/#org/model") == ("https://h/v1", "org/model")
    with pytest.raises(WispError):
        split_target("http://")
