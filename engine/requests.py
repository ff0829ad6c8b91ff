"""What a caller asks the engine for (plain, picklable dataclasses)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from engine.errors import RequestError
from engine.request_checks import (check_messages, check_reasoning_effort, check_text, check_token_ids,
                                   check_tool_choice, check_tools)
from engine.sampling import SamplingParams


@dataclass(frozen=True)
class GenerateRequest:
    """Exactly one of prompt (raw text completion), messages (rendered with the chat template) or prompt_token_ids."""

    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    prompt_token_ids: tuple[int, ...] | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    reasoning_effort: str | None = None  # low, medium or high, for chat templates that take it (gpt-oss)
    enable_thinking: bool | None = None  # False: no thinking, for chat templates that take it (Qwen3)
    tools: tuple[dict, ...] | None = None  # OpenAI-style function tools offered to the model (chat only)
    tool_choice: str | None = None  # None: the model decides; "required": one or more calls; a tool's name: that one
    parallel_tool_calls: bool = True  # with tool_choice "required": the reply may make several calls
    suffix: str | None = None  # with a raw prompt: the text after the cursor (fill-in-the-middle, for FIM models)
    # Speculative decoding for this request: "off", or "ngram" / "auto" (drafts from n-grams of the prompt and the
    # reply; lossless); None: as the engine was started (--speculative).
    speculative: str | None = None

    def __post_init__(self):
        given = [x is not None for x in (self.prompt, self.messages, self.prompt_token_ids)]
        if sum(given) != 1:
            raise RequestError("give exactly one of prompt, messages or prompt_token_ids")
        if self.messages is not None and not self.messages:
            raise RequestError("messages must not be empty")
        if self.prompt_token_ids is not None and not self.prompt_token_ids:
            raise RequestError("prompt_token_ids must not be empty")
        if self.prompt is not None:
            check_text(self.prompt, "prompt")
        if self.messages is not None:
            check_messages(self.messages)
        if self.prompt_token_ids is not None:
            check_token_ids(self.prompt_token_ids)
        if not isinstance(self.sampling, SamplingParams):
            raise RequestError("sampling must be a SamplingParams", "sampling")
        check_reasoning_effort(self.reasoning_effort)
        if self.enable_thinking is not None and not isinstance(self.enable_thinking, bool):
            raise RequestError("enable_thinking must be true or false", "enable_thinking")
        if self.tools is not None:
            check_tools(self.tools)
        check_tool_choice(self.tool_choice, self.tools)
        if not isinstance(self.parallel_tool_calls, bool):
            raise RequestError("parallel_tool_calls must be true or false", "parallel_tool_calls")
        if self.suffix is not None:
            check_text(self.suffix, "suffix")
            if self.prompt is None:
                raise RequestError("suffix fills in the middle of a raw prompt: send prompt, not messages", "suffix")
        if self.speculative not in (None, "off", "ngram", "auto"):
            raise RequestError(f"speculative takes off, ngram or auto per request, got {self.speculative!r}"
                               " (mtp is chosen when the engine starts: --speculative mtp)", "speculative")
        for name in ("reasoning_effort", "enable_thinking", "tools"):
            if getattr(self, name) is not None and self.messages is None:
                raise RequestError(f"{name} goes into the chat template: send messages, not a raw prompt", name)
