"""Checks of the values one request carries, shared by every way in (engine.api, the CLI, the server).
A value that passes is one the tokenizer, the sampler and torch's generator accept, so a bad request is
refused where it enters and never reaches the engine loop that other requests share."""

from __future__ import annotations

import json
import math

from engine.errors import RequestError
from engine.vision.image_input import check_images, image_parts

INT32_MAX = 2**31 - 1  # token ids, token counts and top_k: torch indexes with them
REASONING_EFFORTS = ("low", "medium", "high")  # what gpt-oss's chat template and the OpenAI API take


def check_text(value: object, field: str) -> str:
    """A str that encodes as UTF-8: no lone surrogates (JSON's "\\ud800", or undecodable bytes in argv/stdin)."""
    if not isinstance(value, str):
        raise RequestError(f"{field} must be text, got {type(value).__name__}", field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise RequestError(f"{field} is not valid UTF-8 text (character {error.start} is a lone surrogate "
                           "or an undecodable byte)", field) from None
    return value


def check_int(value: object, field: str, low: int, high: int, label: str | None = None) -> int:
    """A whole number (not a bool) in [low, high]; `label` names it in the message when `field` is too broad."""
    label = label or field
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{label} must be a whole number, got {type(value).__name__}", field)
    if not low <= value <= high:
        raise RequestError(f"{label} must be between {low} and {high}, got {shorten(value)}", field)
    return value


def check_float(value: object, field: str) -> float:
    """A finite real number (ints are fine; bools, NaN and infinities are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RequestError(f"{field} must be a finite number, got {shorten(value)}", field)
    return float(value)


def check_messages(messages: object) -> None:
    """Chat turns: dicts with a text role and content (text, or a list of {"type": "text", "text": str} and
    {"type": "image", "image": bytes} parts); an assistant turn may hold `tool_calls` (OpenAI's shape, arguments
    as JSON text or an object) and a tool's reply its `tool_call_id`. Images are checked against engine.vision's
    limits here (count, encoded size, a readable header, pixel count), on the caller's thread."""
    if not isinstance(messages, (tuple, list)):
        raise RequestError(f"messages must be a sequence of dicts, got {type(messages).__name__}", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise RequestError(f"messages.{index} must be a dict with role and content", f"messages.{index}")
        check_text(message.get("role"), f"messages.{index}.role")
        if isinstance(message.get("content"), (list, tuple)):
            check_parts(message["content"], f"messages.{index}.content")
        else:
            check_text(message.get("content"), f"messages.{index}.content")
        if message.get("tool_call_id") is not None:
            check_text(message["tool_call_id"], f"messages.{index}.tool_call_id")
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, (tuple, list)):
                raise RequestError("tool_calls must be a list", f"messages.{index}.tool_calls")
            for number, call in enumerate(calls):
                check_function(call, f"messages.{index}.tool_calls.{number}")
    check_images(image_parts(messages))


def check_parts(parts: list | tuple, field: str) -> None:
    """A message's content parts: text parts with text, image parts with the encoded file's bytes."""
    for number, part in enumerate(parts):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            check_text(part.get("text"), f"{field}.{number}.text")
        elif kind != "image":
            raise RequestError(f'{field}.{number} must be {{"type": "text", "text": ...}} or '
                               f'{{"type": "image", "image": bytes}}', f"{field}.{number}")


def check_function(entry: object, field: str) -> None:
    """A tool or a tool call: {"type": "function", "function": {"name": text, ...}}, JSON through and through."""
    function = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(function, dict) or entry.get("type", "function") != "function":
        raise RequestError(f'{field} must be {{"type": "function", "function": {{"name": ..., ...}}}}', field)
    if not check_text(function.get("name"), f"{field}.function.name"):
        raise RequestError("a function needs a name", f"{field}.function.name")
    check_json(entry, field)


def check_json(value: object, field: str) -> None:
    """Plain JSON (what the chat template's tojson writes) with valid Unicode text."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError, RecursionError) as error:
        raise RequestError(f"{field} is not plain JSON with valid text ({type(error).__name__})", field) from None


def check_tools(tools: object) -> None:
    """Function tools offered to the model, in OpenAI's shape."""
    if not isinstance(tools, (tuple, list)) or not tools:
        raise RequestError("tools must be a non-empty list of function tools", "tools")
    for index, tool in enumerate(tools):
        check_function(tool, f"tools.{index}")


def check_tool_choice(choice: object, tools: object) -> None:
    """None, "required", or the name of one of the tools offered."""
    if choice is None:
        return
    names = [tool["function"]["name"] for tool in tools or ()]
    if not names:
        raise RequestError("tool_choice needs tools to choose from", "tool_choice")
    if choice != "required" and choice not in names:
        raise RequestError(f"tool_choice names {shorten(choice)}, which is not among the tools offered "
                           f"({', '.join(names)})", "tool_choice")


def check_token_ids(ids: object) -> None:
    if not isinstance(ids, (tuple, list)):
        raise RequestError("prompt_token_ids must be a sequence of token ids", "prompt")
    for token_id in ids:
        check_int(token_id, "prompt", 0, INT32_MAX, label="a prompt token id")


def shorten(value: object, limit: int = 40) -> str:
    """A value for an error line: a 10**400 or a megabyte string must not flood the terminal."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"a {value.bit_length()}-bit number"  # str() of a huge int is slow and capped by Python
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def check_reasoning_effort(value: object) -> None:
    """None (the chat template's default) or one of REASONING_EFFORTS."""
    if value is not None and value not in REASONING_EFFORTS:
        raise RequestError(f"reasoning_effort must be one of {', '.join(REASONING_EFFORTS)}, not {value!r}",
                           "reasoning_effort")
