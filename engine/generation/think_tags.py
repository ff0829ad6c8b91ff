"""`<think>...</think>` reasoning (Qwen3, DeepSeek-R1, QwQ), split from the answer as it streams.

The model opens its reply with `<think>`, or the chat template already wrote it at the end of the prompt (Qwen3
thinking-2507, DeepSeek-R1): then the reply starts inside the reasoning. `</think>` ends the reasoning; the
whitespace around it (the templates put newlines there) belongs to neither part. A reply that does not open
with `<think>` is all answer.
"""

from __future__ import annotations

from engine.generation.reasoning import Parsed, ReasoningFormat, held_marker_prefix

OPEN, CLOSE = "<think>", "</think>"


class ThinkTagParser:
    """One request's output (engine thread)."""

    is_ended = False  # the tokenizer's end-of-sequence tokens end these models' replies

    def __init__(self, prompt_tail: str = ""):
        self._state = "reasoning" if prompt_tail.rstrip().endswith(OPEN) else "start"
        self._buffer = ""
        self._has_text = {"content": False, "reasoning": False}
        self._is_after_reasoning = False  # the answer's leading whitespace is dropped after </think>

    def feed(self, text: str) -> Parsed:
        parsed = Parsed()
        self._buffer += text
        while self._step(parsed):
            pass
        return parsed

    def flush(self) -> Parsed:
        parsed = Parsed()
        if self._state == "reasoning":
            self._emit(parsed, "reasoning", self._buffer.rstrip())
        else:
            self._emit(parsed, "content", self._buffer)
        self._buffer = ""
        return parsed

    def _step(self, parsed: Parsed) -> bool:
        """Consume what the buffer settles; False when it needs more text."""
        if self._state == "start":
            opening = self._buffer.lstrip()
            if opening.startswith(OPEN):
                self._buffer, self._state = opening[len(OPEN):], "reasoning"
                return True
            if OPEN.startswith(opening):  # nothing but whitespace and maybe the start of <think> yet
                return False
            self._state = "content"
            return True
        if self._state == "content":
            self._emit(parsed, "content", self._buffer)
            self._buffer = ""
            return False
        at = self._buffer.find(CLOSE)
        if at >= 0:
            self._emit(parsed, "reasoning", self._buffer[:at].rstrip())
            self._buffer, self._state, self._is_after_reasoning = self._buffer[at + len(CLOSE):], "content", True
            return True
        body = self._buffer[:len(self._buffer) - held_marker_prefix(self._buffer, (CLOSE,))]
        shown = body.rstrip()  # trailing whitespace waits: it may be what precedes </think>
        self._emit(parsed, "reasoning", shown)
        self._buffer = self._buffer[len(shown):]
        return False

    def _emit(self, parsed: Parsed, field: str, text: str) -> None:
        is_leading = not self._has_text[field] and (field == "reasoning" or self._is_after_reasoning)
        if is_leading:
            text = text.lstrip()
        if text:
            self._has_text[field] = True
            setattr(parsed, field, getattr(parsed, field) + text)


THINK_TAGS = ReasoningFormat("think", (OPEN, CLOSE), ThinkTagParser)
