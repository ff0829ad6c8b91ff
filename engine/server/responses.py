"""OpenAI response objects (plain dicts) for chat and text completions, whole and as stream chunks."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from engine.events import FinishEvent, RequestStats, TokenEvent
from engine.server.served_model import ServedModel
from engine.server.tools import tool_calls_out

FINISH_REASONS = {"stop": "stop", "length": "length", "cancelled": "abort"}  # vLLM's name for a request cut off


@dataclass(frozen=True)
class Shape:
    """What one response looks like: its id, the endpoint's object names and whether logprobs are wanted."""

    is_chat: bool
    request_id: str
    served: ServedModel
    logprobs: bool = False
    tokens_as_ids: bool = False
    created: int = field(default_factory=lambda: int(time.time()))
    index: int = 0  # which of the request's n choices

    @property
    def id(self) -> str:
        return ("chatcmpl-" if self.is_chat else "cmpl-") + self.request_id

    def envelope(self, obj: str, choices: list) -> dict:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.served.id, "choices": choices}


def usage(stats: RequestStats) -> dict:
    return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
            "total_tokens": stats.prompt_tokens + stats.generated_tokens,
            "spec_proposed": stats.spec_proposed, "spec_accepted": stats.spec_accepted}


def finish_reason(finish: FinishEvent) -> str:
    if finish.tool_calls and finish.reason == "stop":
        return "tool_calls"
    return FINISH_REASONS.get(finish.reason, "stop")


def _number(logprob: float) -> float | None:
    return None if math.isnan(logprob) else logprob


def chat_logprobs(shape: Shape, tokens: list[TokenEvent]) -> dict | None:
    if not shape.logprobs:
        return None
    entries = []
    for token in tokens:
        entry = token_entry(shape, token.token_id, token.text, token.logprob)
        entries.append({**entry, "top_logprobs": [token_entry(shape, token_id, "", logprob)
                                                  for token_id, logprob in token.top_logprobs]})
    return {"content": entries}


def token_entry(shape: Shape, token_id: int, text: str, logprob: float) -> dict:
    name = shape.served.token_string(token_id, text, shape.tokens_as_ids)
    return {"token": name, "logprob": _number(logprob), "bytes": list(name.encode())}


def completion_logprobs(shape: Shape, tokens: list[TokenEvent], offset: int = 0) -> dict | None:
    if not shape.logprobs:
        return None
    names, offsets, alternatives = [], [], []
    for token in tokens:
        names.append(shape.served.token_string(token.token_id, token.text, shape.tokens_as_ids))
        offsets.append(offset)
        offset += len(token.text)
        alternatives.append({shape.served.token_string(token_id, "", shape.tokens_as_ids): _number(logprob)
                             for token_id, logprob in token.top_logprobs})
    top = alternatives if any(alternatives) else None
    return {"tokens": names, "token_logprobs": [_number(t.logprob) for t in tokens], "top_logprobs": top,
            "text_offset": offsets}


def chat_message(finish: FinishEvent) -> dict:
    """The assistant message; a reasoning model's reasoning goes in `reasoning_content` (vLLM's and DeepSeek's
    field), never into `content`; its tool calls in `tool_calls` (content null when it wrote nothing else)."""
    message = {"role": "assistant", "content": finish.text or (None if finish.tool_calls else "")}
    if finish.reasoning:
        message["reasoning_content"] = finish.reasoning
    if finish.tool_calls:
        message["tool_calls"] = tool_calls_out(finish.tool_calls)
    return message


def chat_delta(text: str, reasoning: str) -> dict:
    """A stream chunk's delta: the answer text and the reasoning text a token completed (either may be absent)."""
    delta = {"reasoning_content": reasoning} if reasoning else {}
    return {**delta, "content": text} if text else delta


def chat_completion(shape: Shape, finish: FinishEvent, tokens: list[TokenEvent]) -> dict:
    choice = {"index": shape.index, "message": chat_message(finish),
              "logprobs": chat_logprobs(shape, tokens), "finish_reason": finish_reason(finish)}
    return {**shape.envelope("chat.completion", [choice]), "usage": usage(finish.stats)}


def chat_chunk(shape: Shape, delta: dict, tokens: list[TokenEvent], reason: str | None = None) -> dict:
    choice = {"index": shape.index, "delta": delta, "logprobs": chat_logprobs(shape, tokens), "finish_reason": reason}
    return shape.envelope("chat.completion.chunk", [choice])


def text_completion(shape: Shape, finish: FinishEvent, tokens: list[TokenEvent]) -> dict:
    choice = {"index": shape.index, "text": finish.text, "logprobs": completion_logprobs(shape, tokens),
              "finish_reason": finish_reason(finish)}
    return {**shape.envelope("text_completion", [choice]), "usage": usage(finish.stats)}


def completion_chunk(shape: Shape, text: str, tokens: list[TokenEvent], offset: int,
                     reason: str | None = None) -> dict:
    choice = {"index": shape.index, "text": text, "logprobs": completion_logprobs(shape, tokens, offset),
              "finish_reason": reason}
    return shape.envelope("text_completion", [choice])


def usage_chunk(shape: Shape, finish: FinishEvent) -> dict:
    obj = "chat.completion.chunk" if shape.is_chat else "text_completion"
    return {**shape.envelope(obj, []), "usage": usage(finish.stats)}


def model_card(served: ServedModel, created: int) -> dict:
    card = {"id": served.id, "object": "model", "created": created, "owned_by": "wisp"}
    if served.max_model_len:
        card["max_model_len"] = served.max_model_len
    return card
