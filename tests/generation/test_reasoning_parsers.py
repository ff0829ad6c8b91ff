"""The reasoning parsers on text: what lands in reasoning, answer and tool calls, and that any split of the same
text into streamed pieces gives the same result."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.events import ToolCall
from engine.generation.harmony import HarmonyParser
from engine.generation.think_tags import ThinkTagParser
from tests.generation.reasoning_fixtures import HARMONY_PIECES, parse


def characters(text):
    return list(text)


HARMONY_REPLY = ("<|channel|>analysis<|message|>The user greets; <b>reply</b> briefly.<|end|>"
                 "<|start|>assistant<|channel|>final<|message|>Hello <there>!<|return|>")


def test_harmony_analysis_is_reasoning_and_final_is_the_answer():
    assert parse(HarmonyParser(), characters(HARMONY_REPLY)) == (
        "Hello <there>!", "The user greets; <b>reply</b> briefly.", [], True)


def test_harmony_text_after_return_is_dropped():
    extra = "<|start|>assistant<|channel|>final<|message|>more"
    content, _, _, is_ended = parse(HarmonyParser(), [HARMONY_REPLY + extra])
    assert (content, is_ended) == ("Hello <there>!", True)


def test_harmony_tool_call_is_neither_reasoning_nor_answer():
    reply = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\"}<|call|>")
    assert parse(HarmonyParser(), characters(reply)) == (
        "", "Need the weather.", [ToolCall("get_weather", '{"city": "Paris"}')], True)


def test_harmony_tool_call_streams_its_name_then_its_arguments_as_written():
    reply = ("<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary "
             "to=functions.get_weather <|constrain|>json<|message|>{\"city\": \"Paris\", \"days\": 3}<|call|>")
    parser = HarmonyParser()
    deltas = [delta for char in characters(reply) for delta in parser.feed(char).tool_call_deltas]
    assert (deltas[0].index, deltas[0].name, deltas[0].arguments) == (0, "get_weather", "")
    assert {delta.index for delta in deltas} == {0} and all(delta.name is None for delta in deltas[1:])
    assert len(deltas) > 10 and "".join(delta.arguments for delta in deltas) == '{"city": "Paris", "days": 3}'


def test_harmony_recipient_before_the_channel_is_a_tool_call_too():
    reply = "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{}<|call|>"
    assert parse(HarmonyParser(), [reply])[2] == [ToolCall("lookup", "{}")]


def test_harmony_commentary_preamble_is_part_of_the_answer_and_messages_are_separated():
    reply = ("<|channel|>analysis<|message|>one<|end|><|start|>assistant<|channel|>analysis<|message|>two<|end|>"
             "<|start|>assistant<|channel|>commentary<|message|>Let me check.<|end|>"
             "<|start|>assistant<|channel|>final<|message|>Done.<|return|>")
    assert parse(HarmonyParser(), characters(reply))[:2] == ("Let me check.\n\nDone.", "one\n\ntwo")


def test_harmony_cut_short_keeps_what_was_written():
    assert parse(HarmonyParser(), characters("<|channel|>analysis<|message|>Thinking ab<|en")) == (
        "", "Thinking ab<|en", [], True)


def test_harmony_text_without_framing_is_the_answer():
    assert parse(HarmonyParser(), characters("plain words"))[:2] == ("plain words", "")


def test_think_tags_split_reasoning_from_answer_without_the_surrounding_newlines():
    reply = "<think>\nLet me add: 2 + 2 < 5.\n</think>\n\nThe answer is 4."
    assert parse(ThinkTagParser(), characters(reply))[:2] == ("The answer is 4.", "Let me add: 2 + 2 < 5.")


def test_think_opened_by_the_prompt_starts_in_the_reasoning():
    parser = ThinkTagParser(prompt_tail="<|im_start|>assistant\n<think>\n")
    assert parse(parser, characters("so 4\n</think>\n\n4"))[:2] == ("4", "so 4")


def test_a_reply_without_think_is_all_answer():
    assert parse(ThinkTagParser(), characters("  Just this; <think> is literal"))[:2] == (
        "  Just this; <think> is literal", "")


def test_unclosed_think_is_all_reasoning():
    assert parse(ThinkTagParser(), characters("<think>\nstill going  "))[:2] == ("", "still going")


THINK_PIECES = st.sampled_from(["<think>", "</think>", "<", "</", "think>", " ", "\n", "\n\n", "words", "ü"])


def any_split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({cut % (len(text) + 1) for cut in cuts})
    return [text[start:end] for start, end in zip([0, *points], [*points, len(text)])]


@settings(max_examples=300, deadline=None)
@given(st.lists(HARMONY_PIECES, max_size=30), st.lists(st.integers(0, 10_000), max_size=12))
def test_harmony_parsing_does_not_depend_on_how_the_text_is_split(pieces, cuts):
    text = "".join(pieces)
    assert parse(HarmonyParser(), any_split(text, cuts)) == parse(HarmonyParser(), [text])


@settings(max_examples=300, deadline=None)
@given(st.lists(THINK_PIECES, max_size=30), st.lists(st.integers(0, 10_000), max_size=12), st.booleans())
def test_think_parsing_does_not_depend_on_how_the_text_is_split(pieces, cuts, is_opened_by_prompt):
    text, tail = "".join(pieces), "<think>\n" if is_opened_by_prompt else ""
    assert parse(ThinkTagParser(tail), any_split(text, cuts)) == parse(ThinkTagParser(tail), [text])
