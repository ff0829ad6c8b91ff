"""Tool calls in a chat reply's answer text, for models whose chat template asks for them as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen2.5, Qwen3, Qwen3-Next, Hermes) or, inside the same
tags, as `<function=NAME><parameter=KEY>VALUE</parameter>...</function>` (Qwen3-Coder, Qwen3.5). gpt-oss's harmony
format has its own (engine.generation.harmony). The calls are taken out of the answer as it streams; a block that is
neither stays in the answer as written."""

from __future__ import annotations

import json
import re

from engine.events import ToolCall, ToolCallDelta
from engine.generation.harmony import HARMONY
from engine.generation.reasoning import Parsed, held_marker_prefix
from engine.generation.reasoning_formats import reasoning_format
from engine.generation.tool_call_stream import XML_PARAMETER, CallStream, json_or_text

OPEN, CLOSE = "<tool_call>", "</tool_call>"
XML_FUNCTION = re.compile(r"\s*<function=([^>\s]+)>(.*?)</function>\s*", re.S)


def writes_tool_call_tags(tokenizer) -> bool:
    """Whether the template a request with tools is rendered with asks for `<tool_call>` blocks."""
    return OPEN in getattr(tokenizer, "tool_template_source", "")


def can_call_tools(tokenizer) -> bool:
    """Whether the model takes tools and Wisp reads its calls back: its template renders `tools`, and writes
    harmony (gpt-oss) or `<tool_call>` blocks."""
    source = getattr(tokenizer, "tool_template_source", "")
    return "tools" in source and (writes_tool_call_tags(tokenizer) or reasoning_format(tokenizer) is HARMONY)


def parse_xml_call(body: str) -> ToolCall | None:
    """`<function=NAME><parameter=KEY>VALUE</parameter>...</function>` -> the call; a value that is JSON (a number,
    an object, ...) is taken as such, any other as a string, as the Qwen3-Coder templates render them."""
    match = XML_FUNCTION.fullmatch(body)
    if match is None:
        return None
    arguments = {key: json_or_text(value) for key, value in XML_PARAMETER.findall(match.group(2))}
    return ToolCall(match.group(1), json.dumps(arguments, ensure_ascii=False))


def parse_call(body: str) -> ToolCall | None:
    """`{"name": str, "arguments": object or JSON text}` or the XML function form -> the call (arguments as JSON
    text); None otherwise."""
    if body.lstrip().startswith("<function="):
        return parse_xml_call(body)
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(value["name"], text)


class ToolCallTags:
    """One request's answer text (engine thread): `feed` the answer as it streams, `flush` at the end. A call
    streams as it is generated (Parsed.tool_call_deltas) from the moment its name is known."""

    def __init__(self):
        self._buffer = ""
        self._is_inside = False
        self._num_calls = 0
        self._call = CallStream()

    def feed(self, text: str) -> Parsed:
        parsed = Parsed()
        self._buffer += text
        while True:
            if self._is_inside:
                at = self._buffer.find(CLOSE)
                if at < 0:
                    self._stream_call(parsed, self._buffer[:len(self._buffer) - held_marker_prefix(
                        self._buffer, (CLOSE,))])
                    return parsed
                body, self._buffer, self._is_inside = self._buffer[:at], self._buffer[at + len(CLOSE):], False
                self._stream_call(parsed, body)
                self._end_call(parsed, body)
                continue
            at = self._buffer.find(OPEN)
            if at >= 0:
                parsed.content += self._buffer[:at]
                self._buffer, self._is_inside = self._buffer[at + len(OPEN):], True
                continue
            settled = len(self._buffer) - held_marker_prefix(self._buffer, (OPEN,))
            parsed.content += self._buffer[:settled]
            self._buffer = self._buffer[settled:]
            return parsed

    def _stream_call(self, parsed: Parsed, body: str) -> None:
        name, arguments = self._call.feed(body)
        if name is not None or arguments:
            parsed.tool_call_deltas.append(ToolCallDelta(self._num_calls, name, arguments))

    def _end_call(self, parsed: Parsed, body: str) -> None:
        """A block that is no call stays answer text (one whose start streamed as a call too: the next call reuses
        its index, as the reply's calls are numbered)."""
        call = parse_call(body)
        if call is None:
            parsed.content += OPEN + body + CLOSE
        else:
            parsed.tool_calls.append(call)
            self._num_calls += 1
        self._call = CallStream()

    def flush(self) -> Parsed:
        """What is left: an unfinished call stays text."""
        text = (OPEN if self._is_inside else "") + self._buffer
        self._buffer, self._is_inside = "", False
        return Parsed(content=text)
