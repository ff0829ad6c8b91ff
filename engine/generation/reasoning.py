"""Reasoning shown apart from the answer: which format a model's chat template uses, and what its parsers share.

A reasoning model writes its thinking into the same token stream as its answer, framed by markers: gpt-oss's
harmony channels (`<|channel|>analysis<|message|>...<|end|>`, engine.generation.harmony) or Qwen3 / DeepSeek-R1
`<think>...</think>` tags (engine.generation.think_tags). A parser reads the detokenized text of one request
incrementally (engine thread) and splits it into reasoning and answer; every split of the same text into
pieces gives the same result. Only chat requests are parsed: a raw prompt's continuation is plain text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Callable, Protocol

from engine.events import ToolCall, ToolCallDelta

PROMPT_TAIL_TOKENS = 8  # enough of the prompt's end to see whether the template left a `<think>` open


@dataclass
class Parsed:
    """What one piece of generated text adds to the answer (`content`) and to the reasoning."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_deltas: list[ToolCallDelta] = field(default_factory=list)  # the calls as they are generated


class ReasoningParser(Protocol):
    is_ended: bool  # the format's end of generation was read (harmony's <|return|> or <|call|>)

    def feed(self, text: str) -> Parsed:
        """Take the next piece of text; return what can be shown now (markers held back until they settle)."""
        ...

    def flush(self) -> Parsed:
        """Return everything held back, at the end of the request."""
        ...


@dataclass(frozen=True)
class ReasoningFormat:
    """A family of reasoning markers. `markers` are kept in the text stream even when they are special tokens
    (detokenizing would drop them otherwise); `make_parser(prompt_tail)` starts a parser for one request."""

    name: str
    markers: tuple[str, ...]
    make_parser: Callable[[str], ReasoningParser]

    def marker_ids(self, tokenizer) -> frozenset[int]:
        """The ids of the markers that are single tokens of this vocabulary."""
        ids = (tokenizer.encode(marker, add_special_tokens=False) for marker in self.markers)
        return frozenset(token_ids[0] for token_ids in ids if len(token_ids) == 1)

    def parser(self, tokenizer, prompt_ids: Sequence[int]) -> ReasoningParser:
        tail = tokenizer.decode(list(prompt_ids[-PROMPT_TAIL_TOKENS:]), skip_special_tokens=False)
        return self.make_parser(tail)


def held_marker_prefix(text: str, markers: Sequence[str]) -> int:
    """Length of the tail of `text` that could be the start of a marker (held back until it settles).

    Every marker holds "<" only as its first character, so only the tail from the last "<" can be one."""
    start = text.rfind("<")
    tail = text[start:] if start != -1 else ""
    return len(tail) if tail and any(marker != tail and marker.startswith(tail) for marker in markers) else 0
