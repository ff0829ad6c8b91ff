"""Fields outside OpenAI's API that clients of other local servers (llama.cpp's server, vLLM, LM Studio, Ollama's
OpenAI endpoint) send. A field Wisp cannot honour is refused with a 400 naming it only when its value would change
the answer; every other unknown field is ignored and named in the response's `Warning` header, so that a client
built for another server keeps working."""

from __future__ import annotations

import json

from engine.server.api_errors import bad_request

# field -> the value under which it changes nothing (what those servers default to)
NEUTRAL_VALUES = {
    "mirostat": 0,  # llama.cpp's server, Ollama
    "mirostat_mode": 0,
    "typical_p": 1.0,  # llama.cpp's server, vLLM, LM Studio
    "tfs_z": 1.0,
    "top_a": 0.0,
    "min_tokens": 0,  # vLLM
    "use_beam_search": False,
    "length_penalty": 1.0,
    "dynatemp_range": 0.0,  # llama.cpp's server
    "xtc_probability": 0.0,
    "dry_multiplier": 0.0,
    "top_n_sigma": -1.0,
    "guided_regex": None,  # vLLM's constraints other than JSON
    "guided_choice": None,
    "guided_grammar": None,
    "grammar": None,  # llama.cpp's GBNF
}

WARNING_CODE = 299  # RFC 7234's "miscellaneous persistent warning"
MAX_NAMED = 8  # a body may hold thousands of unknown keys; the header names the first few
MAX_NAME_CHARS = 40


def check_extra_fields(extra: dict | None) -> list[str]:
    """-> names of the unknown fields to ignore (sorted); ApiError(400) for one Wisp cannot honour."""
    ignored = []
    for name in sorted(extra or {}):
        value = extra[name]
        if name in NEUTRAL_VALUES:
            if not is_neutral(value, NEUTRAL_VALUES[name]):
                raise bad_request(f"{name} is not supported by this server and would change the answer; "
                                  f"leave it out (or at {NEUTRAL_VALUES[name]!r})", name)
            continue
        ignored.append(name)
    return ignored


def is_neutral(value: object, neutral: object) -> bool:
    if neutral is None or isinstance(neutral, bool):
        return value is neutral or value is None
    return value is None or (not isinstance(value, bool) and isinstance(value, (int, float)) and value == neutral)


def ignored_warning(names: list[str]) -> list[str]:
    """The warning line for ignored fields (none when there are none)."""
    if not names:
        return []
    shown = [name[:MAX_NAME_CHARS] for name in names[:MAX_NAMED]]
    more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
    return [f"ignored unknown fields: {', '.join(shown)}{more}"]


def warning_header(warnings: list[str]) -> dict[str, str]:
    """The `Warning` header that tells a client what was not honoured. JSON escaping keeps it one line of ASCII
    (headers are Latin-1; a field name may hold a newline or a quote)."""
    if not warnings:
        return {}
    return {"Warning": f"{WARNING_CODE} wisp {json.dumps('; '.join(warnings), ensure_ascii=True)}"}
