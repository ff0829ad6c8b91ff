"""A request's reasoning options as chat-template variables: gpt-oss's `reasoning_effort` (the OpenAI API's field)
and Qwen3's `enable_thinking`. They reach the template through GenerateRequest, `wisp run --chat
--reasoning-effort/--thinking` and `wisp chat`'s /effort and /think; ModelInfo says which models take them; a bad
value or an option without a chat is refused in one line."""

from __future__ import annotations

import io

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.cli.chat_repl import ChatSession
from engine.cli import main
from engine.errors import RequestError
from engine.generation.prompt import prompt_token_ids
from engine.text.tokenizer import Tokenizer
from tests.generation.reasoning_fixtures import write_reasoning_model

HI = ({"role": "user", "content": "Hi"},)
SAMPLING = SamplingParams(max_tokens=3, ignore_eos=True)


@pytest.fixture(scope="module")
def harmony_model(tmp_path_factory):
    return write_reasoning_model(tmp_path_factory.mktemp("effort_model"), "harmony")


@pytest.fixture(scope="module")
def think_model(tmp_path_factory):
    """Qwen3-style: `<think>` tags and a template that takes enable_thinking."""
    return write_reasoning_model(tmp_path_factory.mktemp("think_model"), "think")


@pytest.fixture(scope="module")
def plain_model(tiny_model_dir):
    return tiny_model_dir("qwen3_moe")


def rendered(folder, effort: str | None = None, thinking: bool | None = None) -> str:
    tokenizer = Tokenizer.from_folder(folder)
    request = GenerateRequest(messages=HI, reasoning_effort=effort, enable_thinking=thinking)
    ids = prompt_token_ids(request, tokenizer, 4096)
    return tokenizer.decode(ids, skip_special_tokens=False)


def test_the_effort_is_the_templates_variable(harmony_model):
    assert "Reasoning: high" in rendered(harmony_model, "high")
    assert "Reasoning: low" in rendered(harmony_model, "low")
    assert "Reasoning: medium" in rendered(harmony_model, None)  # the template's default


def test_thinking_off_is_the_templates_switch(think_model):
    assert rendered(think_model, thinking=False).endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert rendered(think_model, thinking=True).endswith("<|im_start|>assistant\n")
    assert rendered(think_model) == rendered(think_model, thinking=True)


def test_model_info_says_which_templates_take_them(harmony_model, think_model, plain_model):
    with Engine(EngineOptions(model=str(think_model), device="cpu")) as engine:
        assert engine.info.thinking_switch and not engine.info.reasoning_effort
        finish = engine.generate(GenerateRequest(messages=HI, sampling=SAMPLING, enable_thinking=False))
        assert finish.reason == "length" and finish.reasoning == ""  # the template closed the think block
    with Engine(EngineOptions(model=str(harmony_model), device="cpu")) as engine:
        assert engine.info.reasoning_effort and not engine.info.thinking_switch
        finish = engine.generate(GenerateRequest(messages=HI, sampling=SAMPLING, reasoning_effort="low"))
    assert finish.reason == "length" and finish.stats.prompt_tokens > 0
    with Engine(EngineOptions(model=str(plain_model), device="cpu")) as engine:
        assert not engine.info.reasoning_effort and not engine.info.thinking_switch


@pytest.mark.parametrize("fields", [dict(messages=HI, reasoning_effort="extreme"),
                                    dict(messages=HI, reasoning_effort=3),
                                    dict(prompt="Hi", reasoning_effort="high"),
                                    dict(messages=HI, enable_thinking="no"),
                                    dict(messages=HI, enable_thinking=0),
                                    dict(prompt="Hi", enable_thinking=False)])
def test_a_bad_option_is_refused_with_its_field(fields):
    with pytest.raises(RequestError) as error:
        GenerateRequest(**fields)
    assert error.value.field == next(name for name in ("reasoning_effort", "enable_thinking") if name in fields)


def test_wisp_run_passes_the_options_and_refuses_them_without_chat(harmony_model, plain_model, capsys):
    base = ["run", "--device", "cpu", "--max-tokens", "2", "--prompt", "Hi"]
    assert main([*base[:1], str(harmony_model), *base[1:], "--chat", "--reasoning-effort", "high", "--json"]) == 0
    assert "note" not in capsys.readouterr().err
    assert main([*base[:1], str(plain_model), *base[1:], "--chat", "--reasoning-effort", "high", "--json"]) == 0
    assert "takes no reasoning effort" in capsys.readouterr().err
    assert main([*base[:1], str(plain_model), *base[1:], "--chat", "--thinking", "off", "--json"]) == 0
    assert "takes no thinking switch" in capsys.readouterr().err
    for extra, expected in ((["--reasoning-effort", "high"], "add --chat"),
                            (["--chat", "--reasoning-effort", "extreme"], "invalid choice"),
                            (["--thinking", "off"], "--thinking goes into the chat template: add --chat"),
                            (["--chat", "--thinking", "maybe"], "invalid choice")):
        assert main([*base[:1], str(harmony_model), *base[1:], *extra]) == 2
        err = capsys.readouterr().err
        assert expected in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_chat_commands_change_the_next_requests(harmony_model):
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
        chat.handle("/think off")
        chat.handle("and now")
        chat.handle("/think perhaps")
    assert [request.reasoning_effort for request in sent] == ["low", "high", None, None]
    assert [request.enable_thinking for request in sent] == [None, None, None, False]
    assert "[reasoning effort: high]" in err.getvalue()
    assert "/effort takes low, medium, high or default (now: default)" in err.getvalue()
    assert "[thinking: off (this model's chat template has no switch)]" in err.getvalue()
    assert "/think takes on, off or default (now: off)" in err.getvalue()
