"""Ollama's request bodies (/api/chat, /api/generate) -> engine GenerateRequests. Ollama's `options` map onto
Wisp's sampling fields; options that cannot change the answer here (num_ctx, num_thread, repeat_last_n, ...) are
ignored and named in the `Warning` header, those that would and that Wisp cannot honour (mirostat, typical_p,
...) are a 400 naming them."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.request_checks import check_text
from engine.requests import GenerateRequest
from engine.sampling import OLLAMA_DEFAULTS, SamplingParams
from engine.server.api_errors import bad_request
from engine.server.image_parts import decode_base64, refuse_without_tower
from engine.server.convert import logit_bias
from engine.server.extra_fields import check_extra_fields, ignored_warning
from engine.server.limits import ServerLimits
from engine.server.served_model import ServedModel
from engine.server.structured import ANY_JSON_OBJECT, schema_text

# Ollama option -> SamplingParams field
OPTION_FIELDS = {"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
                 "seed": "seed", "repeat_penalty": "repetition_penalty", "presence_penalty": "presence_penalty",
                 "frequency_penalty": "frequency_penalty"}
TAKEN = {*OPTION_FIELDS, "num_predict", "stop", "logit_bias"}


@dataclass(frozen=True)
class OllamaPrepared:
    request: GenerateRequest
    stream: bool
    warnings: list[str] = field(default_factory=list)


def sampling_from_options(body: dict, served: ServedModel, limits: ServerLimits) -> tuple[SamplingParams, list[str]]:
    options = body.get("options") or {}
    if not isinstance(options, dict):
        raise bad_request("options must be an object", "options")
    options = {key: value for key, value in options.items() if value is not None}  # null: Ollama's default
    values = {name: options.get(option, OLLAMA_DEFAULTS.get(option)) for option, name in OPTION_FIELDS.items()}
    values = {name: value for name, value in values.items() if value is not None}
    cap = min(limits.max_tokens, served.max_model_len) if served.max_model_len else limits.max_tokens
    wanted = options.get("num_predict")
    if wanted is not None and (isinstance(wanted, bool) or not isinstance(wanted, int)):
        raise bad_request("num_predict must be a whole number", "options.num_predict")
    if wanted is not None and wanted > cap:
        raise bad_request(f"num_predict is {wanted} but this server allows at most {cap}", "options.num_predict")
    stop = options.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or len(stop) > limits.max_stop_strings:
        raise bad_request(f"stop takes up to {limits.max_stop_strings} strings", "options.stop")
    ignored = check_extra_fields({key: value for key, value in options.items() if key not in TAKEN})
    if not isinstance(options.get("logit_bias", {}), dict):
        raise bad_request('logit_bias is an object of token ids and biases, such as {"1234": -100}',
                          "options.logit_bias")
    sampling = SamplingParams(max_tokens=wanted if wanted and wanted > 0 else cap, stop=tuple(stop),
                              logit_bias=logit_bias(options.get("logit_bias")),
                              json_schema=format_schema(body.get("format")), **values)
    return sampling, ignored_warning([f"options.{name}" for name in ignored])


def format_schema(value: object) -> str | None:
    """Ollama's `format`: "json" for any JSON object, or a JSON schema object."""
    if value in (None, ""):
        return None
    if value == "json":
        return ANY_JSON_OBJECT
    if isinstance(value, dict):
        return schema_text(value, "format")
    raise bad_request('format is "json" or a JSON schema object', "format")


def chat_message(message: object, index: int, served: ServedModel | None = None) -> dict:
    """An Ollama message as chat templates take it (tool calls' arguments are objects already); its `images`
    (base64 strings) go before its text as image parts."""
    if not isinstance(message, dict):
        raise bad_request("a message is an object with role and content", f"messages.{index}")
    turn = {"role": message.get("role"), "content": message.get("content") or ""}
    images = message.get("images")
    if images:
        field = f"messages.{index}.images"
        refuse_without_tower(served is not None and served.sees_images, served.id if served else "", field)
        if not isinstance(images, list):
            raise bad_request("images is a list of base64 strings", field)
        parts = [{"type": "image", "image": decode_base64(data, f"{field}.{n}")} for n, data in enumerate(images)]
        turn["content"] = [*parts, {"type": "text", "text": turn["content"]}]
    if turn["role"] not in ("system", "user", "assistant", "tool"):
        raise bad_request("role must be system, user, assistant or tool", f"messages.{index}.role")
    calls = message.get("tool_calls")
    if calls:
        turn["tool_calls"] = [{"type": "function", "function": call.get("function", {})} if isinstance(call, dict)
                              else call for call in calls]
    if message.get("tool_name"):
        turn["name"] = message["tool_name"]
    return turn


def thinking_flag(body: dict) -> bool | None:
    think = body.get("think")
    if think is None or isinstance(think, bool):
        return think
    if think in ("low", "medium", "high"):
        return True
    raise bad_request("think is true, false, or low/medium/high", "think")


def chat_request(body: dict, served: ServedModel, limits: ServerLimits, warnings: list[str]) -> OllamaPrepared:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages must be a non-empty list (an empty one only loads the model)", "messages")
    sampling, ignored = sampling_from_options(body, served, limits)
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise bad_request("tools must be a list of function tools", "tools")
    if tools and not served.tool_calls:
        raise bad_request(f"model '{served.id}' does not take tools", "tools")
    thinking = thinking_flag(body)
    if sampling.json_schema is not None and thinking is None:
        thinking = False  # the grammar holds from the first token: no room for a <think> block
    effort = body.get("think") if body.get("think") in ("low", "medium", "high") else None
    turns = tuple(chat_message(m, i, served) for i, m in enumerate(messages))
    request = GenerateRequest(messages=turns, sampling=sampling, tools=tuple(tools) if tools else None,
                              enable_thinking=thinking, reasoning_effort=effort)
    return OllamaPrepared(request, body.get("stream", True) is not False, warnings + ignored)


def generate_request(body: dict, served: ServedModel, limits: ServerLimits, warnings: list[str]) -> OllamaPrepared:
    prompt = check_text(body.get("prompt") or "", "prompt")
    sampling, ignored = sampling_from_options(body, served, limits)
    stream = body.get("stream", True) is not False
    suffix = body.get("suffix")
    if body.get("images") and (suffix or body.get("raw") or not served.has_chat_template):
        raise bad_request("images go into the chat template: leave out raw and suffix", "images")
    if suffix:
        fields = {"prompt_token_ids": served.fim_prompt_ids(prompt, check_text(suffix, "suffix"))}
    elif body.get("raw") or not served.has_chat_template:
        fields = {"prompt": prompt}
    else:  # Ollama applies the model's template to a prompt unless raw is set
        system = [{"role": "system", "content": check_text(body["system"], "system")}] if body.get("system") else []
        user = chat_message({"role": "user", "content": prompt, "images": body.get("images")}, 0, served)
        fields = {"messages": (*system, user)}
        if sampling.json_schema is not None or body.get("think") is not None:
            fields["enable_thinking"] = bool(thinking_flag(body)) if body.get("think") is not None else False
    return OllamaPrepared(GenerateRequest(sampling=sampling, **fields), stream, warnings + ignored)
