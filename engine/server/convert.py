"""OpenAI request bodies -> engine GenerateRequests. Every refusal is an ApiError (400/404) that names the field.
Nothing here reads the file system: `model` is only compared with the served id."""

from __future__ import annotations

from dataclasses import dataclass

from engine.request_checks import check_text
from engine.requests import GenerateRequest
from engine.sampling import SamplingParams
from engine.server.api_errors import ApiError, bad_request
from engine.server.limits import ServerLimits
from engine.server.schemas import ChatCompletionRequest, CompletionRequest, SamplingFields
from engine.server.served_model import ServedModel
from engine.server.tools import offered_tools, template_message

COMPLETIONS_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions


@dataclass(frozen=True)
class Prepared:
    """A GenerateRequest plus how the client wants the answer shaped."""

    request: GenerateRequest
    stream: bool
    include_usage: bool
    logprobs: bool
    tokens_as_ids: bool


def check_model(name: str | None, served: ServedModel) -> None:
    if name and name != served.id:
        raise ApiError(404, f"the model '{name}' does not exist here; this server serves '{served.id}' "
                            "(the model is chosen when the server starts)", param="model", code="model_not_found")


def refuse_unsupported(body: SamplingFields) -> None:
    if body.n != 1:
        raise bad_request("n must be 1: Wisp returns one choice per request", "n")
    for field in ("presence_penalty", "frequency_penalty"):
        if getattr(body, field):
            raise bad_request(f"{field} is not supported; leave it at 0", field)
    if body.logit_bias:
        raise bad_request("logit_bias is not supported", "logit_bias")


def sampling_params(body: SamplingFields, max_tokens: int | None, served: ServedModel,
                    limits: ServerLimits) -> SamplingParams:
    cap = min(limits.max_tokens, served.max_model_len) if served.max_model_len else limits.max_tokens
    if max_tokens is not None and max_tokens > cap:
        raise bad_request(f"max_tokens is {max_tokens} but this server allows at most {cap}", "max_tokens")
    stop = [body.stop] if isinstance(body.stop, str) else list(body.stop or [])
    if len(stop) > limits.max_stop_strings or not all(stop):
        raise bad_request(f"stop takes up to {limits.max_stop_strings} non-empty strings", "stop")
    # SamplingParams refuses seeds and stop strings the engine cannot take (a RequestError: 400 naming the field).
    return SamplingParams(max_tokens=max_tokens or cap, temperature=body.temperature, top_p=body.top_p,
                          top_k=max(body.top_k, 0), seed=body.seed, stop=tuple(stop), ignore_eos=body.ignore_eos)


def chat_request(body: ChatCompletionRequest, served: ServedModel, limits: ServerLimits) -> Prepared:
    check_model(body.model, served)
    refuse_unsupported(body)
    tools = offered_tools(body, served)
    if body.audio or (body.modalities and body.modalities != ["text"]):
        raise bad_request("Wisp's server answers in text only", "modalities" if body.modalities else "audio")
    if body.response_format and body.response_format.get("type", "text") != "text":
        raise bad_request("only response_format {\"type\": \"text\"} is supported", "response_format")
    if body.top_logprobs:
        raise bad_request("top_logprobs is not supported (logprobs gives the chosen tokens' logprobs)", "top_logprobs")
    messages = tuple(template_message(message, index) for index, message in enumerate(body.messages))
    sampling = sampling_params(body, body.max_completion_tokens or body.max_tokens, served, limits)
    request = GenerateRequest(messages=messages, sampling=sampling, reasoning_effort=body.reasoning_effort,
                              enable_thinking=enable_thinking(body.chat_template_kwargs), tools=tools)
    return Prepared(request, body.stream, body.include_usage, body.logprobs, body.return_tokens_as_token_ids)


def enable_thinking(kwargs: dict | None) -> bool | None:
    """chat_template_kwargs (vLLM's extension) may hold enable_thinking, true or false, and nothing else."""
    for key, value in (kwargs or {}).items():
        if key != "enable_thinking":
            raise bad_request("chat_template_kwargs takes enable_thinking only", f"chat_template_kwargs.{key}")
        if not isinstance(value, bool):
            raise bad_request("must be true or false", "chat_template_kwargs.enable_thinking")
    return (kwargs or {}).get("enable_thinking")


def completion_request(body: CompletionRequest, served: ServedModel, limits: ServerLimits) -> Prepared:
    check_model(body.model, served)
    refuse_unsupported(body)
    if body.echo:
        raise bad_request("echo is not supported", "echo")
    if body.best_of not in (None, 1):
        raise bad_request("best_of must be 1", "best_of")
    if body.logprobs:
        raise bad_request("logprobs above 0 (alternative tokens) are not supported; use 0 for the chosen tokens'",
                          "logprobs")
    sampling = sampling_params(body, body.max_tokens or COMPLETIONS_DEFAULT_MAX_TOKENS, served, limits)
    request = GenerateRequest(**prompt_fields(body, served), sampling=sampling)
    return Prepared(request, body.stream, body.include_usage, body.logprobs is not None,
                    body.return_tokens_as_token_ids)


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
