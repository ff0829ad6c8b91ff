"""A request the tokenizer or the seeded generator refuses fails alone: requests in flight finish with the
tokens they get alone, and nothing waits forever."""

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import RequestError

GOOD = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=24, ignore_eos=True))


@pytest.fixture(scope="module", params=["wisp", "llama.cpp"])
def engine(request, tmp_path_factory):
    """The demo model on Wisp's engine, and its GGUF twin on llama.cpp."""
    model = None
    if request.param == "llama.cpp":
        pytest.importorskip("llama_cpp")
        from engine.gguf.convert import convert
        from engine.loading.model_path import DEMO_MODEL

        model = str(convert(DEMO_MODEL, tmp_path_factory.mktemp("gguf") / "demo-f32.gguf", "f32").path)
    with Engine(EngineOptions(model=model, device="cpu")) as engine:
        yield engine


def smuggled(**values) -> GenerateRequest:
    """A request carrying values its checks refuse, as a caller that skips them (or a future bug) would send."""
    request = GenerateRequest(prompt="ok", sampling=SamplingParams(max_tokens=4))
    for name, value in values.items():
        target = request.sampling if name == "seed" else request
        object.__setattr__(target, name, value)
    return request


@pytest.mark.parametrize("values", [{"prompt": "\ud800"}, {"seed": 2**70}])
def test_a_request_that_fails_admission_fails_alone(engine, values):
    alone = engine.generate(GOOD)
    running = engine.submit(GenerateRequest(prompt=GOOD.prompt, sampling=GOOD.sampling))
    bad = engine.submit(smuggled(**values)).result()
    assert bad.reason == "error" and bad.error.startswith("the request was refused")
    finish = running.result()
    assert finish.reason == "length" and finish.token_ids == alone.token_ids


def test_token_ids_past_the_vocabulary_are_refused_at_admission(engine):
    finish = engine.generate(GenerateRequest(prompt_token_ids=(1, 10**6), sampling=SamplingParams(max_tokens=2)))
    assert finish.reason == "error" and "vocabulary" in finish.error


@pytest.mark.parametrize("make, field", [
    (lambda: GenerateRequest(prompt="\udcff\udcfe"), "prompt"),
    (lambda: GenerateRequest(messages=({"role": "user", "content": "\ud800"},)), "messages.0.content"),
    (lambda: GenerateRequest(messages=({"role": "user", "content": 5},)), "messages.0.content"),
    (lambda: GenerateRequest(prompt_token_ids=(1, -1)), "prompt"),
    (lambda: SamplingParams(seed=1180591620717411303424), "seed"),
    (lambda: SamplingParams(seed=True), "seed"),
    (lambda: SamplingParams(stop=("",)), "stop.0"),
    (lambda: SamplingParams(stop=("\ud800",)), "stop.0"),
    (lambda: SamplingParams(top_k=2**40), "top_k"),
    (lambda: SamplingParams(temperature=float("nan")), "temperature"),
    (lambda: SamplingParams(max_tokens="5"), "max_tokens"),
])
def test_requests_are_checked_where_they_are_made(make, field):
    with pytest.raises(RequestError) as excinfo:
        make()
    assert excinfo.value.field == field


def test_a_handle_does_not_wait_for_an_engine_that_stopped(engine):
    from engine.api import RequestHandle

    handle = RequestHandle("orphan", is_serving=lambda: False)
    assert handle.result().reason == "error"
