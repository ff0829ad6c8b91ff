"""The one place sampling values are checked, for every surface (engine.api, the CLI, the OpenAI and Ollama
routes, the app): SamplingParams runs check_sampling when it is made, and a value out of range is a RequestError
naming the field (a 400 on the server, exit 2 in the CLI). The ranges are OpenAI's (temperature in [0, 2],
penalties in [-2, 2], biases in [-100, 100], up to 20 alternatives) and vLLM's (repetition_penalty above 0, at
most 10 here: beyond it every seen token is effectively banned). The defaults are per surface: engine.sampling."""

from __future__ import annotations

import json

from engine.errors import RequestError
from engine.request_checks import INT32_MAX, check_float, check_int, check_text, shorten

SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1  # what torch.Generator.manual_seed takes
MAX_TEMPERATURE = 2.0
MAX_STOP_CHARS = 1024  # no real stop string comes near; each one is matched on every generated token
MAX_TOP_LOGPROBS = 20
MAX_LOGIT_BIAS_ENTRIES = 1024  # OpenAI takes up to 300 tokens; a bigger table is a mistake or an attack
MAX_REPETITION_PENALTY = 10.0
MAX_SCHEMA_NESTING = 64  # pydantic's deepest generated schemas nest ~12; deeper is an attack on the compiler


def nesting(value: object) -> int:
    """How deep lists and objects nest (iteratively: the depth is what is being checked)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_SCHEMA_NESTING:
                todo.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_nesting(schema: object, field: str) -> None:
    if nesting(schema) > MAX_SCHEMA_NESTING:
        raise RequestError(f"the JSON schema nests deeper than {MAX_SCHEMA_NESTING} levels", field)


def check_sampling(params) -> None:
    """Every field of an engine.sampling.SamplingParams."""
    check_int(params.max_tokens, "max_tokens", 1, INT32_MAX)
    if not 0.0 <= check_float(params.temperature, "temperature") <= MAX_TEMPERATURE:
        raise RequestError(f"temperature must be between 0 and {MAX_TEMPERATURE:g}, got {params.temperature}",
                           "temperature")
    if not 0.0 < check_float(params.top_p, "top_p") <= 1.0:
        raise RequestError(f"top_p must be in (0, 1], got {params.top_p}", "top_p")
    check_int(params.top_k, "top_k", 0, INT32_MAX)
    check_seed(params.seed)
    check_stop(params.stop)
    if not isinstance(params.ignore_eos, bool):
        raise RequestError("ignore_eos must be true or false", "ignore_eos")
    if not 0.0 <= check_float(params.min_p, "min_p") <= 1.0:
        raise RequestError(f"min_p must be between 0 and 1, got {params.min_p}", "min_p")
    check_penalties(params.repetition_penalty, params.presence_penalty, params.frequency_penalty)
    check_logit_bias(params.logit_bias)
    check_int(params.top_logprobs, "top_logprobs", 0, MAX_TOP_LOGPROBS)
    check_json_schema(params.json_schema)


def check_seed(seed: object) -> None:
    if seed is not None:
        check_int(seed, "seed", SEED_MIN, SEED_MAX)


def check_stop(stop: object) -> None:
    if not isinstance(stop, (tuple, list)):
        raise RequestError(f"stop must be a sequence of strings, got {type(stop).__name__}", "stop")
    for index, text in enumerate(stop):
        if not check_text(text, f"stop.{index}"):
            raise RequestError("stop strings must not be empty", f"stop.{index}")
        if len(text) > MAX_STOP_CHARS:
            raise RequestError(f"a stop string may hold at most {MAX_STOP_CHARS} characters, "
                               f"got {len(text)}", f"stop.{index}")


def check_penalties(repetition: object, presence: object, frequency: object) -> None:
    if not 0.0 < check_float(repetition, "repetition_penalty") <= MAX_REPETITION_PENALTY:
        raise RequestError(f"repetition_penalty must be above 0 and at most {MAX_REPETITION_PENALTY} "
                           f"(1 changes nothing), got {repetition}", "repetition_penalty")
    for name, value in (("presence_penalty", presence), ("frequency_penalty", frequency)):
        if not -2.0 <= check_float(value, name) <= 2.0:
            raise RequestError(f"{name} must be between -2 and 2, got {value}", name)


def check_logit_bias(pairs: object) -> None:
    """(token id, bias) pairs, each id once, each bias in [-100, 100]."""
    if not isinstance(pairs, tuple) or len(pairs) > MAX_LOGIT_BIAS_ENTRIES:
        raise RequestError(f"logit_bias must be a tuple of at most {MAX_LOGIT_BIAS_ENTRIES} (token id, bias) pairs",
                           "logit_bias")
    seen = set()
    for pair in pairs:
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise RequestError("logit_bias entries are (token id, bias) pairs", "logit_bias")
        token_id = check_int(pair[0], "logit_bias", 0, INT32_MAX, label="a logit_bias token id")
        if not -100.0 <= check_float(pair[1], "logit_bias") <= 100.0:
            raise RequestError(f"a logit_bias value must be between -100 and 100, got {pair[1]}", "logit_bias")
        if token_id in seen:
            raise RequestError(f"logit_bias names token {token_id} twice", "logit_bias")
        seen.add(token_id)


def check_json_schema(schema: object) -> None:
    """None, or a JSON schema written as JSON text (the engine compiles it when the request is added)."""
    if schema is None:
        return
    if not isinstance(schema, str):
        raise RequestError("json_schema must be the schema as JSON text", "json_schema")
    try:
        value = json.loads(schema)
    except (ValueError, RecursionError) as error:
        raise RequestError(f"json_schema is not valid JSON: {error}", "json_schema") from None
    if not isinstance(value, (dict, bool)):
        raise RequestError("a JSON schema is an object (or true)", "json_schema")
    check_nesting(value, "json_schema")
