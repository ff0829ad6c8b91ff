"""Tool calls read out of a chat reply: `<tool_call>` blocks (Qwen3, Hermes) taken out of the answer as it
streams, whatever pieces the text comes in; the tools offered reach the chat template; ModelInfo says which
models can call tools; bad tools are refused with their field."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.runtime.llm_engine as llm_engine
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, TokenEvent
from engine.errors import RequestError
from engine.events import ToolCall
from engine.generation.prompt import prompt_token_ids
from engine.generation.tool_calls import ToolCallTags
from engine.text.tokenizer import Tokenizer
from tests.generation.tool_fixtures import CALL_REPLY, WEATHER, write_tool_model
from tests.tiny_models import VOCAB

ASK = ({"role": "user", "content": "Weather in Paris?"},)
PARIS = ToolCall("get_weather", '{"city": "Paris"}')


def read(pieces: list[str]):
    tags, content, calls = ToolCallTags(), "", []
    for piece in pieces:
        parsed = tags.feed(piece)
        content, calls = content + parsed.content, calls + parsed.tool_calls
    rest = tags.flush()
    return content + rest.content, calls


def splits(text: str):
    return st.lists(st.integers(0, len(text)), max_size=6).map(
        lambda cuts: [text[a:b] for a, b in zip([0, *sorted(cuts)], [*sorted(cuts), len(text)])])


TEXT = f"Let me check.\n{CALL_REPLY}\n<tool_call>not json</tool_call> and <b>bold</b> <tool_call>{{\"name\": 1}}"


@settings(max_examples=200, deadline=None)
@given(splits(TEXT))
def test_any_split_of_the_text_gives_the_same_calls_and_answer(pieces):
    content, calls = read(pieces)
    assert calls == [PARIS]
    assert content == ("Let me check.\n\n<tool_call>not json</tool_call> and <b>bold</b> "
                       "<tool_call>{\"name\": 1}")  # not calls: left as written (the last one never closed)


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory):
    folder = write_tool_model(tmp_path_factory.mktemp("tool_model"))
    assert Tokenizer.from_folder(folder).vocab_size <= VOCAB
    return folder


def test_the_tools_reach_the_template(tool_model):
    tokenizer = Tokenizer.from_folder(tool_model)
    with_tools = tokenizer.decode(prompt_token_ids(GenerateRequest(messages=ASK, tools=(WEATHER,)), tokenizer, 4096),
                                  skip_special_tokens=False)
    without = tokenizer.decode(prompt_token_ids(GenerateRequest(messages=ASK), tokenizer, 4096),
                               skip_special_tokens=False)
    assert '"name": "get_weather"' in with_tools and "<tools>" not in without


def test_the_engine_returns_the_call_apart_from_the_answer(tool_model, monkeypatch):
    tokenizer = Tokenizer.from_folder(tool_model)
    script = iter(tokenizer.encode(CALL_REPLY, add_special_tokens=False) + [tokenizer.token_to_id("<|im_end|>")] * 4)
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(script)]), torch.tensor([-1.0])))
    with Engine(EngineOptions(model=str(tool_model), device="cpu")) as engine:
        assert engine.info.tool_calls
        handle = engine.submit(GenerateRequest(messages=ASK, tools=(WEATHER,), sampling=SamplingParams(max_tokens=60)))
        tokens = [event for event in handle if isinstance(event, TokenEvent)]
    finish = handle.finish
    assert (finish.reason, finish.text, finish.tool_calls) == ("stop", "", (PARIS,))
    assert "".join(token.text for token in tokens) == ""  # the call never streams as answer text


def test_without_tools_offered_the_reply_is_left_as_text(tool_model, monkeypatch):
    tokenizer = Tokenizer.from_folder(tool_model)
    script = iter(tokenizer.encode(CALL_REPLY, add_special_tokens=False) + [tokenizer.token_to_id("<|im_end|>")] * 4)
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(script)]), torch.tensor([-1.0])))
    with Engine(EngineOptions(model=str(tool_model), device="cpu")) as engine:
        finish = engine.generate(GenerateRequest(messages=ASK, sampling=SamplingParams(max_tokens=60)))
    assert (finish.text, finish.tool_calls) == (CALL_REPLY, ())


def test_a_model_without_tools_in_its_template_says_so(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as engine:
        assert not engine.info.tool_calls


@pytest.mark.parametrize("tools, field", [
    ((), "tools"),
    (({"type": "function"},), "tools.0"),
    (({"type": "retrieval", "function": {"name": "f"}},), "tools.0"),
    (({"type": "function", "function": {"name": ""}},), "tools.0.function.name"),
    (({"type": "function", "function": {"name": "f", "parameters": {"x": float("nan")}}},), "tools.0"),
    (({"type": "function", "function": {"name": "f", "description": "\ud800"}},), "tools.0"),
])
def test_bad_tools_are_refused_with_their_field(tools, field):
    with pytest.raises(RequestError) as error:
        GenerateRequest(messages=ASK, tools=tools)
    assert error.value.field == field


def test_tools_need_a_chat():
    with pytest.raises(RequestError, match="send messages"):
        GenerateRequest(prompt="hi", tools=(WEATHER,))


def test_the_xml_function_form_of_qwen3_5_is_read_as_a_call():
    reply = ("Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
             "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
    content, calls = read([reply[:20], reply[20:45], reply[45:]])
    assert content == "Checking.\n"
    assert calls == [ToolCall("get_weather", '{"city": "Paris", "days": 3}')]
    assert read(["<tool_call><function=broken></tool_call>"])[1] == []


def streamed(parser, pieces: list[str]) -> dict[int, list]:
    """index -> [name, argument pieces...] as the deltas of `parser` give them."""
    calls: dict[int, list] = {}
    for piece in pieces:
        for delta in parser.feed(piece).tool_call_deltas:
            if delta.name is not None:
                assert delta.index not in calls and delta.index == len(calls)  # each call starts once, in order
                calls[delta.index] = [delta.name]
            calls[delta.index].append(delta.arguments)
    return calls


LONG_CALLS = ('Sure.<tool_call>\n{"name": "search", "arguments": {"query":  "caf\\u00e9 \\"best\\"\\n\\ud83d\\ude00",'
              ' "limit":10,"filters":[1.5e2, true, null, {"a": []}]}}\n</tool_call>\n<tool_call>\n<function=get_weather>'
              '\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>')


@settings(max_examples=300, deadline=None)
@given(splits(LONG_CALLS))
def test_streamed_arguments_join_to_the_final_arguments_whatever_the_split(pieces):
    tags = ToolCallTags()
    calls = streamed(tags, pieces)
    _, final = read(pieces)
    assert [(name, "".join(arguments)) for name, *arguments in calls.values()] == [
        (call.name, call.arguments) for call in final]
    assert [call.name for call in final] == ["search", "get_weather"]


def test_a_call_streams_its_arguments_token_by_token():
    calls = streamed(ToolCallTags(), list(LONG_CALLS))
    assert len([piece for piece in calls[0][1:] if piece]) > 10
    assert calls[1][1:] == ["", '{"city": "Paris"', ', "days": 3', "}"]  # the XML form: a parameter at a time


def test_a_call_whose_name_comes_after_its_arguments_or_whose_arguments_are_a_string_streams_nothing():
    for text in ('<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>',
                 '<tool_call>{"name": "f", "arguments": "{\\"a\\": 1}"}</tool_call>'):
        deltas = [delta for char in text for delta in ToolCallTags().feed(char).tool_call_deltas]
        assert not [delta for delta in deltas if delta.arguments]
