"""Tool calls in a chat reply's answer text, for models whose chat template asks for them as
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` (Qwen2.5, Qwen3, Qwen3-Next, Hermes) or, inside the same
tags, as `<function=NAME><parameter=KEY>VALUE</parameter>...</function>` (Qwen3-Coder, Qwen3.5). gpt-oss's harmony
format has its own (engine.generation.harmony). The calls are taken out of the answer as it streams; a block that is
neither stays in the answer as written."""

from __future__ import annotations

import json
import re

from engine.events import ToolCall
from engine.generation.harmony import HARMONY
from engine.generation.reasoning import Parsed, held_marker_prefix
from engine.generation.reasoning_formats import reasoning_format

OPEN, CLOSE = "<tool_call>", "</tool_call>"
XML_FUNCTION = re.compile(r"\s*<function=([^>\s]+)>(.*?)</function>\s*", re.S)
XML_PARAMETER = re.compile(r"<parameter=([^>\s]+)>\n?(.*?)\n?</parameter>", re.S)


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


def json_or_text(value: str):
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return value


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
    """One request's answer text (engine thread): `feed` the answer as it streams, `flush` at the end."""

    def __init__(self):
        self._buffer = ""
        self._is_inside = False

    def feed(self, text: str) -> Parsed:
        parsed = Parsed()
        self._buffer += text
        while True:
            if self._is_inside:
                at = self._buffer.find(CLOSE)
                if at < 0:
                    return parsed
                body, self._buffer, self._is_inside = self._buffer[:at], self._buffer[at + len(CLOSE):], False
                call = parse_call(body)
                if call is None:
                    parsed.content += OPEN + body + CLOSE
                else:
                    parsed.tool_calls.append(call)
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

    def flush(self) -> Parsed:
        """What is left: an unfinished call stays text."""
        text = (OPEN if self._is_inside else "") + self._buffer
        self._buffer, self._is_inside = "", False
        return Parsed(content=text)
