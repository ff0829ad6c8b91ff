"""Reasoning split off a token stream: the chat template and vocabulary pick the format, harmony's markers
survive detokenizing although they are special tokens, <|return|> and <|call|> end the generation, and
the streamed pieces add up to the final fields."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.generation.harmony import HARMONY, HarmonyParser
from engine.generation.reasoning_formats import reasoning_format
from engine.generation.text_stream import TextStream
from engine.generation.think_tags import THINK_TAGS
from engine.requests import GenerateRequest
from engine.sampling import SamplingParams
from engine.text.tokenizer import Tokenizer
from tests.generation.reasoning_fixtures import HARMONY_PIECES, parse, save_harmony_folder, save_think_folder
from tests.text.tokenizer_fixtures import CHATML_TEMPLATE, save_hf_folder, train_byte_level_tokenizer

CHAT = ({"role": "user", "content": "Hi there"},)


@pytest.fixture(scope="module")
def harmony(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_folder(save_harmony_folder(tmp_path_factory.mktemp("harmony")))


@pytest.fixture(scope="module")
def think(tmp_path_factory) -> Tokenizer:
    return Tokenizer.from_folder(save_think_folder(tmp_path_factory.mktemp("think")))


def stream_of(tokenizer, reply: str, request: GenerateRequest):
    """Push the reply's tokens one by one, as the engine does; -> (answer, reasoning, tool calls, tokens used)."""
    prompt = tokenizer.encode_chat(list(request.messages)) if request.messages else tokenizer.encode(request.prompt)
    stream = TextStream.for_request(tokenizer, request, prompt)
    ids = tokenizer.encode(reply, add_special_tokens=False)
    texts, reasonings, used = [], [], 0
    for token_id in ids:
        delta = stream.push(token_id)
        texts.append(delta.text)
        reasonings.append(delta.reasoning)
        used += 1
        if delta.stopped:
            break
    final_text, final_reasoning = stream.final_text(), stream.final_reasoning()
    assert final_text.startswith("".join(texts)) and final_reasoning.startswith("".join(reasonings))
    return final_text, final_reasoning, stream.tool_calls, used, len(ids)


def test_the_template_and_vocabulary_pick_the_format(harmony, think, tmp_path):
    plain = Tokenizer.from_folder(save_hf_folder(tmp_path, train_byte_level_tokenizer(), CHATML_TEMPLATE))
    assert (reasoning_format(harmony), reasoning_format(think), reasoning_format(plain)) == (HARMONY, THINK_TAGS, None)


def test_harmony_markers_are_single_special_tokens(harmony):
    ids = HARMONY.marker_ids(harmony)
    assert len(ids) == len(HARMONY.markers) and ids <= harmony.special_token_ids


def test_harmony_reply_streams_reasoning_apart_and_stops_at_return(harmony):
    reply = ("<|channel|>analysis<|message|>The user says hi. Answer warmly.<|end|><|start|>assistant<|channel|>"
             "final<|message|>Hello! héllo 🙂<|return|><|start|>assistant<|channel|>final<|message|>extra")
    text, reasoning, calls, used, total = stream_of(harmony, reply, GenerateRequest(messages=CHAT))
    assert (text, reasoning, calls) == ("Hello! héllo 🙂", "The user says hi. Answer warmly.", [])
    assert used < total  # <|return|> ended it


def test_harmony_call_ends_the_generation_with_a_tool_call(harmony):
    reply = ("<|channel|>commentary to=functions.search <|constrain|>json<|message|>{\"q\": \"wisp\"}<|call|>"
             "<|start|>")
    text, reasoning, calls, used, total = stream_of(harmony, reply, GenerateRequest(messages=CHAT))
    assert (text, reasoning, [(c.name, c.arguments) for c in calls]) == ("", "", [("search", '{"q": "wisp"}')])
    assert used == total - 1


def test_ignore_eos_generates_past_the_end_marker(harmony):
    reply = "<|channel|>final<|message|>Hi<|return|>more"
    request = GenerateRequest(messages=CHAT, sampling=SamplingParams(ignore_eos=True))
    *_, used, total = stream_of(harmony, reply, request)
    assert used == total


def test_a_raw_prompt_is_not_parsed(harmony):
    reply = "<|channel|>analysis<|message|>thinking<|end|>"
    text, reasoning, *_ = stream_of(harmony, reply, GenerateRequest(prompt="Hi"))
    assert (text, reasoning) == ("analysisthinking", "")  # special tokens skipped, as without a reasoning format


def test_a_stop_string_in_the_answer_ends_it(harmony):
    reply = "<|channel|>analysis<|message|>plan<|end|><|start|>assistant<|channel|>final<|message|>one. STOP two"
    request = GenerateRequest(messages=CHAT, sampling=SamplingParams(stop=("STOP",)))
    text, reasoning, *_ = stream_of(harmony, reply, request)
    assert (text, reasoning) == ("one. ", "plan")


def test_think_tags_split_qwen3_style_replies(think):
    reply = "<think>\nTwo plus two.\n</think>\n\nFour.<|im_end|>"
    text, reasoning, *_ = stream_of(think, reply, GenerateRequest(messages=CHAT))
    assert (text, reasoning) == ("Four.", "Two plus two.")


def test_a_think_opened_by_the_template_starts_the_reply_in_reasoning(think):
    prompt_ids = think.encode_chat(list(CHAT), open_think=True)
    stream = TextStream.for_request(think, GenerateRequest(messages=CHAT), prompt_ids)
    for token_id in think.encode("Two plus two.\n</think>\n\nFour.", add_special_tokens=False):
        stream.push(token_id)
    assert (stream.final_text(), stream.final_reasoning()) == ("Four.", "Two plus two.")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(HARMONY_PIECES, max_size=25))
def test_token_by_token_gives_what_parsing_the_whole_text_gives(harmony, pieces):
    text = "".join(pieces)
    stream = TextStream(harmony, (), HarmonyParser(), HARMONY.marker_ids(harmony))
    texts, reasonings = [], []
    for token_id in harmony.encode(text, add_special_tokens=False):
        delta = stream.push(token_id)
        texts.append(delta.text)
        reasonings.append(delta.reasoning)
        if delta.stopped:
            break
    content, reasoning, tool_calls, _ = parse(HarmonyParser(), [text])
    assert (stream.final_text(), stream.final_reasoning(), stream.tool_calls) == (content, reasoning, tool_calls)
    assert content.startswith("".join(texts)) and reasoning.startswith("".join(reasonings))


def test_harmony_history_sends_the_final_answer_only(harmony):
    messages = [*CHAT, {"role": "assistant", "content": "Hello!", "reasoning_content": "be warm"},
                {"role": "user", "content": "And now?"}]
    prompt = harmony.apply_chat_template(messages)
    assert "<|channel|>final<|message|>Hello!<|end|>" in prompt and "be warm" not in prompt
    assert prompt.endswith("<|start|>user<|message|>And now?<|end|><|start|>assistant")


def published_gpt_oss_template() -> Path | None:
    """gpt-oss's own chat_template.jinja, where this machine has it: $WISP_GPT_OSS_TEMPLATE or the HF cache."""
    given = os.environ.get("WISP_GPT_OSS_TEMPLATE")
    if given:
        return Path(given)
    hub = Path(os.environ.get("HF_HUB_CACHE", Path.home() / ".cache" / "huggingface" / "hub"))
    found = sorted(hub.glob("models--openai--gpt-oss-*/snapshots/*/chat_template.jinja"))
    return found[0] if found else None


@pytest.mark.skipif(published_gpt_oss_template() is None, reason="gpt-oss's chat_template.jinja is not on this machine")
def test_the_published_gpt_oss_template_renders_as_transformers_renders_it(tmp_path):
    from transformers.utils.chat_template_utils import render_jinja_template

    source = published_gpt_oss_template().read_text(encoding="utf-8")
    tokenizer = Tokenizer.from_folder(save_harmony_folder(tmp_path, source))
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    messages = [{"role": "system", "content": "Be brief."}, *CHAT,
                {"role": "assistant", "content": "Hello!", "thinking": "greet"}, {"role": "user", "content": "Rain?"}]
    for extra in ({}, {"tools": tools}, {"reasoning_effort": "high", "builtin_tools": ["browser", "python"]}):
        ours = tokenizer.apply_chat_template(messages, **extra)
        reference = render_jinja_template(conversations=[messages], chat_template=source, add_generation_prompt=True,
                                          **extra)[0][0]
        assert ours == reference
    assert reasoning_format(tokenizer) is HARMONY and "greet" not in ours
