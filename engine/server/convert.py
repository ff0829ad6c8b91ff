"""OpenAI request bodies -> engine GenerateRequests. Every refusal is an ApiError (400) that names the field.
Nothing here reads the file system: `model` is only compared with the served id (any name reaches the one
model served, as on LM Studio and llama.cpp's server; a different name is noted in the `Warning` header)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.request_checks import check_text
from engine.requests import GenerateRequest
from engine.sampling import SamplingParams
from engine.sampling_checks import MAX_TOP_LOGPROBS
from engine.server.api_errors import bad_request
from engine.server.extra_fields import check_extra_fields, ignored_warning
from engine.server.limits import ServerLimits
from engine.server.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields
from engine.server.served_model import ServedModel
from engine.server.structured import requested_schema, taken_extension_fields
from engine.server.tools import forced_tool_choice, offered_tools, template_message

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


@dataclass(frozen=True)
class Prepared:
    """A GenerateRequest plus how the client wants the answer shaped."""

    request: GenerateRequest
    stream: bool
    include_usage: bool
    logprobs: bool
    tokens_as_ids: bool
    warnings: list[str] = field(default_factory=list)  # what was not honoured, for the `Warning` header
    n: int = 1  # choices: n requests with the same prompt (the prefix cache shares its prefill)


def body_warnings(body: SamplingFields, served: ServedModel) -> list[str]:
    """What the response's `Warning` header says: another model name answered by the served one, and unknown
    fields ignored. 400 for a field Wisp cannot honour that would change the answer."""
    warnings = []
    if body.model and check_text(body.model, "model") != served.id:
        warnings.append(f"model {body.model!r} is answered by the model this server serves, {served.id!r}")
    extra = {key: value for key, value in (body.model_extra or {}).items() if key not in taken_extension_fields()}
    return warnings + ignored_warning(check_extra_fields(extra))


def logit_bias(bias: dict | None) -> tuple[tuple[int, float], ...]:
    """OpenAI's {"token id": bias} as (id, bias) pairs; SamplingParams checks the ranges."""
    pairs = []
    for key, value in (bias or {}).items():
        if not (key.isascii() and key.isdigit() and len(key) <= 10):
            raise bad_request(f"logit_bias keys are token ids written as text, such as \"1234\"; got {key[:20]!r}",
                              "logit_bias")
        pairs.append((int(key), value))
    return tuple(pairs)


def sampling_params(body: SamplingFields, max_tokens: int | None, served: ServedModel,
                    limits: ServerLimits, top_logprobs: int = 0) -> SamplingParams:
    """The sampling fields of either endpoint (a 400 naming the field for a value the engine cannot take)."""
    cap = min(limits.max_tokens, served.max_model_len) if served.max_model_len else limits.max_tokens
    if max_tokens is not None and max_tokens > cap:
        raise bad_request(f"max_tokens is {max_tokens} but this server allows at most {cap}", "max_tokens")
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stop) > limits.max_stop_strings or not all(stop):
        raise bad_request(f"stop takes up to {limits.max_stop_strings} non-empty strings", "stop")
    # SamplingParams refuses seeds and stop strings the engine cannot take (a RequestError: 400 naming the field).
    return SamplingParams(max_tokens=max_tokens or cap, temperature=body.temperature, top_p=body.top_p,
                          top_k=0 if body.top_k == -1 else body.top_k, seed=body.seed, stop=tuple(stop),
                          ignore_eos=body.ignore_eos,
                          min_p=body.min_p, repetition_penalty=body.repetition_penalty,
                          presence_penalty=body.presence_penalty, frequency_penalty=body.frequency_penalty,
                          logit_bias=logit_bias(body.logit_bias), top_logprobs=top_logprobs,
                          json_schema=requested_schema(body.response_format, body.model_extra))


def chat_request(body: ChatCompletionRequest, served: ServedModel, limits: ServerLimits,
                 fetched: dict | None = None) -> Prepared:
    """fetched: the bytes of the body's http(s) image URLs (engine.server.image_parts.fetch_remote_images)."""
    warnings = body_warnings(body, served)
    tools = offered_tools(body, served)
    if body.audio or (body.modalities and body.modalities != ["text"]):
        raise bad_request("Wisp's server answers in text only", "modalities" if body.modalities else "audio")
    if body.top_logprobs and not body.logprobs:
        raise bad_request("top_logprobs needs logprobs: true", "top_logprobs")
    messages = tuple(template_message(message, index, served, fetched) for index, message in enumerate(body.messages))
    sampling = sampling_params(body, body.max_completion_tokens or body.max_tokens, served, limits,
                               body.top_logprobs or 0)
    choice = forced_tool_choice(body) if tools else None
    thinking = enable_thinking(body.chat_template_kwargs)
    if (sampling.json_schema is not None or choice is not None) and thinking is None:
        thinking = False  # the grammar holds from the first token: no room for a <think> block before the JSON
    request = GenerateRequest(messages=messages, sampling=sampling, reasoning_effort=body.reasoning_effort,
                              enable_thinking=thinking, tools=tools, tool_choice=choice,
                              parallel_tool_calls=body.parallel_tool_calls,
                              speculative=body.speculative)
    return Prepared(request, body.stream, body.include_usage, body.logprobs, body.return_tokens_as_token_ids, warnings,
                    body.n)


def enable_thinking(kwargs: dict | None) -> bool | None:
    """chat_template_kwargs (vLLM's extension) may hold enable_thinking, true or false, and nothing else."""
    for key, value in (kwargs or {}).items():
        if key != "enable_thinking":
            raise bad_request("chat_template_kwargs takes enable_thinking only", f"chat_template_kwargs.{key}")
        if not isinstance(value, bool):
            raise bad_request("must be true or false", "chat_template_kwargs.enable_thinking")
    return (kwargs or {}).get("enable_thinking")


def completion_request(body: CompletionRequest, served: ServedModel, limits: ServerLimits) -> Prepared:
    warnings = body_warnings(body, served)
    if body.echo:
        raise bad_request("echo is not supported", "echo")
    if body.best_of not in (None, body.n):
        raise bad_request("best_of must equal n: Wisp returns every choice it generates", "best_of")
    if body.logprobs is not None and not 0 <= body.logprobs <= MAX_TOP_LOGPROBS:
        raise bad_request(f"logprobs takes 0 to {MAX_TOP_LOGPROBS} alternatives per token", "logprobs")
    sampling = sampling_params(body, body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS, served, limits,
                               body.logprobs or 0)
    request = GenerateRequest(**prompt_fields(body, served), sampling=sampling, speculative=body.speculative)
    return Prepared(request, body.stream, body.include_usage, body.logprobs is not None,
                    body.return_tokens_as_token_ids, warnings, body.n)


def prompt_fields(body: CompletionRequest, served: ServedModel) -> dict:
    """`prompt` may be text, token ids, or a list of one of either (a batch of one)."""
    prompt = body.prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        if len(prompt) != 1:
            raise bad_request("prompt batches are not supported: send one prompt per request", "prompt")
        prompt = prompt[0]
    if body.suffix is not None:
        if not isinstance(prompt, str):
            raise bad_request("suffix needs a text prompt", "suffix")
        check_text(prompt, "prompt")  # the tokenizer below would fail on a lone surrogate with a TypeError
        check_text(body.suffix, "suffix")
        return {"prompt_token_ids": served.fim_prompt_ids(prompt, body.suffix)}
    if isinstance(prompt, str):
        if not prompt:
            raise bad_request("prompt must not be empty", "prompt")
        return {"prompt": prompt}
    if not prompt:
        raise bad_request("prompt must not be empty", "prompt")
    served.check_token_ids(prompt)
    return {"prompt_token_ids": tuple(prompt)}
