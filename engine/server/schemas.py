"""Request bodies of /v1/chat/completions and /v1/completions (pydantic). OpenAI's fields that change nothing
here (user, metadata, store, ...) are accepted and ignored; a top-level field neither API defines is kept in
`model_extra` and judged in engine.server.extra_fields (ignored with a warning header, or a 400 when Wisp cannot
honour it and it would change the answer)."""

from __future__ import annotations

from typing import Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.sampling import OPENAI_DEFAULTS
from engine.server.api_errors import bad_request

__all__ = ["ChatCompletionRequest", "CompletionRequest", "parse_body", "ValidationError"]

class _Body(BaseModel):
    # strict: JSON types as written (true is not the number 1, "5" is not 5); nested objects tolerate extras
    model_config = ConfigDict(extra="ignore", strict=True)

    @model_validator(mode="before")
    @classmethod
    def null_is_default(cls, data: object) -> object:
        """An explicit null is the field's default, as on OpenAI, vLLM and llama.cpp (the openai SDK sends null
        for a None argument); a required field sent as null is missing."""
        return {key: value for key, value in data.items() if value is not None} if isinstance(data, dict) else data


class StreamOptions(_Body):
    include_usage: bool = False


class ContentPart(_Body):
    """One part of a message's content; only text parts are read (engine.server.tools.content_text)."""

    model_config = ConfigDict(extra="allow", strict=True)
    type: str
    text: str | None = None


class FunctionCall(_Body):
    name: str
    arguments: str  # JSON text, as OpenAI's API writes it


class ToolCallIn(_Body):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Union[str, list[ContentPart], None] = None  # None only in an assistant turn that calls tools
    tool_calls: list[ToolCallIn] | None = None  # an assistant turn's calls
    tool_call_id: str | None = None  # a tool turn: which call it answers
    name: str | None = None


class SamplingFields(_Body):
    """Fields shared by both endpoints. top_k, min_p, repetition_penalty, ignore_eos and
    return_tokens_as_token_ids are extensions that vLLM (and llama.cpp's server, LM Studio) also accept."""

    model_config = ConfigDict(extra="allow", strict=True)
    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=1)
    # sampling values: types here, ranges in engine.sampling_checks (one range for every surface)
    temperature: float = OPENAI_DEFAULTS["temperature"]
    top_p: float = OPENAI_DEFAULTS["top_p"]
    top_k: int = 0  # -1 (vLLM's spelling) or 0: no top-k filter
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: Union[str, list[str], None] = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=8)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    logit_bias: dict | None = None
    response_format: dict | None = None  # structured output (vLLM's completions take it too)
    ignore_eos: bool = False
    return_tokens_as_token_ids: bool = False
    user: object = None  # accepted and ignored (OpenAI's bookkeeping fields)
    metadata: object = None
    store: object = None
    service_tier: object = None
    speculative: str | None = None  # Wisp's: "off", "ngram" or "auto" drafting for this request (lossless)

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class ChatCompletionRequest(SamplingFields):
    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = None
    tools: list | None = None
    tool_choice: Union[str, dict, None] = None
    functions: list | None = None  # the older spelling of tools, refused like them
    function_call: Union[str, dict, None] = None
    audio: dict | None = None  # refused: text only
    modalities: list[str] | None = None
    parallel_tool_calls: bool = True  # with tool_choice "required": several calls allowed
    prompt_cache_key: object = None
    safety_identifier: object = None
    reasoning_effort: object = None  # checked in convert: low, medium or high
    chat_template_kwargs: dict | None = None  # vLLM's extension; Wisp takes enable_thinking alone
    verbosity: object = None
    prediction: object = None


class CompletionRequest(SamplingFields):
    prompt: Union[str, list[str], list[int], list[list[int]]]
    suffix: str | None = None
    echo: bool = False
    best_of: int | None = None
    logprobs: int | None = None


def parse_body(model: type[_Body], data: object) -> _Body:
    """-> the validated body, or ApiError(400) naming the first bad field."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or None
        message = first["msg"]
        raise bad_request(f"{field}: {message}" if field else message, param=field) from None
