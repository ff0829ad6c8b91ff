"""The reasoning effort (gpt-oss's chat template variable, the OpenAI API's `reasoning_effort`): it reaches the
template through GenerateRequest, `wisp run --chat --reasoning-effort` and `wisp chat`'s /effort; ModelInfo says
which models take it; a bad value or an effort without a chat is refused in one line."""

from __future__ import annotations

import io

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.chat_repl import ChatSession
from engine.cli import main
from engine.errors import RequestError
from engine.generation.prompt import prompt_token_ids
from engine.tokenizer import Tokenizer
from tests.engine.reasoning_fixtures import save_harmony_folder
from tests.tiny_models import VOCAB, write_tiny_model

HI = ({"role": "user", "content": "Hi"},)
SAMPLING = SamplingParams(max_tokens=3, ignore_eos=True)


@pytest.fixture(scope="module")
def harmony_model(tmp_path_factory):
    folder = write_tiny_model(tmp_path_factory.mktemp("effort_model"), "qwen3_moe")
    save_harmony_folder(folder, vocab_size=300)
    assert Tokenizer.from_folder(folder).vocab_size <= VOCAB
    return folder


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("plain_model"), "qwen3_moe")


def rendered(folder, effort: str | None) -> str:
    tokenizer = Tokenizer.from_folder(folder)
    ids = prompt_token_ids(GenerateRequest(messages=HI, reasoning_effort=effort), tokenizer, 4096)
    return tokenizer.decode(ids, skip_special_tokens=False)


def test_the_effort_is_the_templates_variable(harmony_model):
    assert "Reasoning: high" in rendered(harmony_model, "high")
    assert "Reasoning: low" in rendered(harmony_model, "low")
    assert "Reasoning: medium" in rendered(harmony_model, None)  # the template's default


def test_model_info_says_which_templates_take_it(harmony_model, plain_model):
    with Engine(EngineOptions(model=str(harmony_model), device="cpu")) as engine:
        assert engine.info.reasoning_effort
        finish = engine.generate(GenerateRequest(messages=HI, sampling=SAMPLING, reasoning_effort="low"))
    assert finish.reason == "length" and finish.stats.prompt_tokens > 0
    with Engine(EngineOptions(model=str(plain_model), device="cpu")) as engine:
        assert not engine.info.reasoning_effort


@pytest.mark.parametrize("fields", [dict(messages=HI, reasoning_effort="extreme"),
                                    dict(messages=HI, reasoning_effort=3),
                                    dict(prompt="Hi", reasoning_effort="high")])
def test_a_bad_effort_is_refused_with_its_field(fields):
    with pytest.raises(RequestError) as error:
        GenerateRequest(**fields)
    assert error.value.field == "reasoning_effort"


def test_wisp_run_passes_the_effort_and_refuses_it_without_chat(harmony_model, plain_model, capsys):
    base = ["run", "--device", "cpu", "--max-tokens", "2", "--prompt", "Hi"]
    assert main([*base[:1], str(harmony_model), *base[1:], "--chat", "--reasoning-effort", "high", "--json"]) == 0
    assert "note" not in capsys.readouterr().err
    assert main([*base[:1], str(plain_model), *base[1:], "--chat", "--reasoning-effort", "high", "--json"]) == 0
    assert "takes no reasoning effort" in capsys.readouterr().err
    for extra, expected in ((["--reasoning-effort", "high"], "add --chat"),
                            (["--chat", "--reasoning-effort", "extreme"], "invalid choice")):
        assert main([*base[:1], str(harmony_model), *base[1:], *extra]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_chat_effort_command_changes_the_next_requests(harmony_model):
    with Engine(EngineOptions(model=str(harmony_model), device="cpu")) as engine:
        sent = []
        submit = engine.submit
        engine.submit = lambda request, *args: sent.append(request) or submit(request, *args)
        err = io.StringIO()
        chat = ChatSession(engine, SAMPLING, out=io.StringIO(), err=err, reasoning_effort="low")
        chat.handle("hello")
        chat.handle("/effort high")
        chat.handle("again")
        chat.handle("/effort default")
        chat.handle("once more")
        chat.handle("/effort extreme")
    assert [request.reasoning_effort for request in sent] == ["low", "high", None]
    assert "[reasoning effort: high]" in err.getvalue()
    assert "/effort takes low, medium, high or default (now: default)" in err.getvalue()
