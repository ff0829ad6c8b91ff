"""gpt-oss's harmony output, split into reasoning, answer and tool calls as it streams.

The chat template ends the prompt with `<|start|>assistant`; the model then writes messages, each a header and
a body: `<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>final<|message|>answer<|return|>`.
The analysis channel is reasoning; final, and commentary addressed to no one (a preamble the user may read),
are the answer; a message with a recipient (`to=functions.NAME`, on commentary) is a tool call, ended by
`<|call|>`. `<|return|>` and `<|call|>` end the generation.
"""

from __future__ import annotations

import re

from engine.events import ToolCall, ToolCallDelta
from engine.generation.reasoning import Parsed, ReasoningFormat, held_marker_prefix

START, END, MESSAGE, CHANNEL = "<|start|>", "<|end|>", "<|message|>", "<|channel|>"
CONSTRAIN, RETURN, CALL = "<|constrain|>", "<|return|>", "<|call|>"
BODY_ENDS = (END, RETURN, CALL, START)  # a <|start|> ends an unterminated message too
ENDS_OF_GENERATION = (RETURN, CALL)
REASONING_CHANNELS = frozenset({"analysis"})
MESSAGE_SEPARATOR = "\n\n"  # between two messages that land in the same field
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


class _Message:
    def __init__(self, header: str):
        _, _, after_channel = header.partition(CHANNEL)
        words = after_channel.replace(CONSTRAIN, " ").split()
        self.channel = words[0] if words else ""
        recipient = _RECIPIENT.search(header)
        self.recipient = recipient.group(1) if recipient else None
        self.arguments: list[str] = []
        self.has_text = False

    @property
    def field(self) -> str:
        if self.recipient is not None:
            return "tool_call"
        return "reasoning" if self.channel in REASONING_CHANNELS else "content"

    def tool_call(self) -> ToolCall:
        return ToolCall(self.recipient.removeprefix("functions."), "".join(self.arguments))


class HarmonyParser:
    """One request's harmony output (engine thread)."""

    def __init__(self, prompt_tail: str = ""):
        self._buffer = ""
        self._message: _Message | None = None  # None while a header is being read
        self._has_field_text = {"content": False, "reasoning": False}
        self._num_calls = 0
        self.is_ended = False

    def feed(self, text: str) -> Parsed:
        parsed = Parsed()
        if not self.is_ended:
            self._buffer += text
            while not self.is_ended and self._step(parsed):
                pass
        return parsed

    def flush(self) -> Parsed:
        parsed = Parsed()
        if self.is_ended:
            return parsed
        if self._message is not None:
            self._emit(parsed, self._buffer)
            self._close(parsed)
        elif "<|" not in self._buffer:  # text with no harmony framing at all: show it as the answer
            self._emit_field(parsed, "content", self._buffer)
        self._buffer = ""
        self.is_ended = True
        return parsed

    def _step(self, parsed: Parsed) -> bool:
        """Consume what the buffer settles; False when it needs more text."""
        if self._message is None:
            return self._read_header(parsed)
        found = [(self._buffer.find(marker), marker) for marker in BODY_ENDS]
        at, marker = min(((i, m) for i, m in found if i >= 0), default=(-1, ""))
        if at < 0:
            shown = len(self._buffer) - held_marker_prefix(self._buffer, BODY_ENDS)
            self._emit(parsed, self._buffer[:shown])
            self._buffer = self._buffer[shown:]
            return False
        self._emit(parsed, self._buffer[:at])
        self._buffer = self._buffer[at + len(marker):]
        self._close(parsed)
        self.is_ended = marker in ENDS_OF_GENERATION
        return True

    def _read_header(self, parsed: Parsed) -> bool:
        ends = [i for i in (self._buffer.find(marker) for marker in ENDS_OF_GENERATION) if i >= 0]
        at = self._buffer.find(MESSAGE)
        if ends and (at < 0 or min(ends) < at):  # the generation ended between two messages
            self.is_ended = True
            return False
        if at < 0:
            return False
        self._message = _Message(self._buffer[:at])
        self._buffer = self._buffer[at + len(MESSAGE):]
        if self._message.field == "tool_call":  # a call streams from its header on, its arguments as written
            parsed.tool_call_deltas.append(ToolCallDelta(self._num_calls, self._message.tool_call().name, ""))
        return True

    def _emit(self, parsed: Parsed, text: str) -> None:
        message = self._message
        if message.field == "tool_call":
            message.arguments.append(text)
            if text:
                parsed.tool_call_deltas.append(ToolCallDelta(self._num_calls, None, text))
        elif text:
            separator = MESSAGE_SEPARATOR if not message.has_text and self._has_field_text[message.field] else ""
            message.has_text = True
            self._emit_field(parsed, message.field, separator + text)

    def _emit_field(self, parsed: Parsed, field: str, text: str) -> None:
        if text:
            setattr(parsed, field, getattr(parsed, field) + text)
            self._has_field_text[field] = True

    def _close(self, parsed: Parsed) -> None:
        if self._message.field == "tool_call":
            parsed.tool_calls.append(self._message.tool_call())
            self._num_calls += 1
        self._message = None


HARMONY = ReasoningFormat("harmony", (START, END, MESSAGE, CHANNEL, CONSTRAIN, RETURN, CALL), HarmonyParser)
