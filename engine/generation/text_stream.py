"""Per-request streaming text: incremental UTF-8-safe detokenisation, stop-string matching, and for chat requests
to a reasoning model the split of reasoning from the answer (engine.generation.reasoning)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.text.detokenizer import IncrementalDetokenizer, StopStringMatcher
from engine.events import ToolCall, ToolCallDelta
from engine.generation.reasoning import Parsed, ReasoningParser
from engine.generation.reasoning_formats import reasoning_format
from engine.generation.tool_calls import ToolCallTags, writes_tool_call_tags
from engine.requests import GenerateRequest


@dataclass(frozen=True)
class StreamDelta:
    """What one token adds: answer text, reasoning text, whether the request should stop now, and the tool calls'
    pieces."""

    text: str
    reasoning: str
    stopped: bool
    tool_call_deltas: tuple[ToolCallDelta, ...] = ()


class TextStream:
    """Engine thread, one per request. Stop strings apply to the whole output, reasoning included (as in vLLM);
    `ignore_end` keeps generating past the reasoning format's own end of generation (ignore_eos)."""

    def __init__(self, tokenizer, stop: tuple[str, ...], parser: ReasoningParser | None = None,
                 kept_ids: frozenset[int] = frozenset(), ignore_end: bool = False,
                 tool_tags: ToolCallTags | None = None):
        self.detokenizer = IncrementalDetokenizer(tokenizer, (), skip_special_tokens=True, kept_ids=kept_ids)
        self.matcher = StopStringMatcher(stop)
        self.parser = parser
        self.tool_tags = tool_tags  # `<tool_call>` blocks taken out of the answer (requests with tools)
        self.ignore_end = ignore_end
        self.parts: list[str] = []
        self.reasoning_parts: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.stopped = False

    @classmethod
    def for_request(cls, tokenizer, request: GenerateRequest, prompt_ids: Sequence[int]) -> TextStream:
        """The stream of a request: chat requests to a reasoning model have their reasoning split off, and those
        that offer tools to a model writing `<tool_call>` blocks have the calls taken out of the answer."""
        sampling = request.sampling
        chat_format = reasoning_format(tokenizer) if request.messages is not None else None
        tool_tags = ToolCallTags() if request.tools and writes_tool_call_tags(tokenizer) else None
        if chat_format is None:
            return cls(tokenizer, sampling.stop, tool_tags=tool_tags)
        return cls(tokenizer, sampling.stop, chat_format.parser(tokenizer, prompt_ids),
                   chat_format.marker_ids(tokenizer), ignore_end=sampling.ignore_eos, tool_tags=tool_tags)

    def push(self, token_id: int) -> StreamDelta:
        if self.stopped:
            return StreamDelta("", "", True)
        text, self.stopped = self.matcher.feed(self.detokenizer.push(token_id))
        parsed = self._parse(text)
        if self.parser is not None and self.parser.is_ended and not self.ignore_end:
            self.stopped = True
        return StreamDelta(parsed.content, parsed.reasoning, self.stopped, tuple(parsed.tool_call_deltas))

    def final_text(self) -> str:
        """All answer text of the request; flushes what was held back (an incomplete character, a possible
        stop prefix, a possible marker)."""
        if not self.stopped:
            text, self.stopped = self.matcher.feed(self.detokenizer.flush())
            self._parse(text)
            if not self.stopped:
                self._parse(self.matcher.flush())
            self.stopped = True
        if self.parser is not None:
            self._collect(self.parser.flush())
        if self.tool_tags is not None:
            self._collect(self.tool_tags.flush(), is_tagged=True)
            if self.tool_calls and not "".join(self.parts).strip():
                self.parts = []  # the whitespace around the calls is not an answer
        return "".join(self.parts)

    def final_reasoning(self) -> str:
        """All reasoning text of the request (call after final_text)."""
        return "".join(self.reasoning_parts)

    def _parse(self, text: str) -> Parsed:
        return self._collect(Parsed(content=text) if self.parser is None else self.parser.feed(text))

    def _collect(self, parsed: Parsed, is_tagged: bool = False) -> Parsed:
        """Keep a parsed piece (its tool-call blocks taken out first); -> what it adds to the stream."""
        if self.tool_tags is not None and not is_tagged:
            tagged = self.tool_tags.feed(parsed.content)
            parsed = Parsed(tagged.content, parsed.reasoning, parsed.tool_calls + tagged.tool_calls,
                            parsed.tool_call_deltas + tagged.tool_call_deltas)
        self.parts.append(parsed.content)
        self.reasoning_parts.append(parsed.reasoning)
        self.tool_calls += parsed.tool_calls
        return parsed
