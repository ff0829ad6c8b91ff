"""Reading a request body: size-limited while it streams in, strict JSON, bounded nesting. Every refusal
is an ApiError (400 or 413), never an exception the server would answer with 500."""

from __future__ import annotations

import json

from starlette.requests import Request

from engine.server.api_errors import ApiError, bad_request

MAX_NESTING = 32  # no OpenAI body nests deeper than ~6; deep nesting is only ever an attack on the parsers


async def read_json(request: Request, max_body_bytes: int) -> dict:
    """The JSON object in the body; 413 past the size limit (checked while reading, not only the header)."""
    check_content_type(request.headers.get("content-type", ""))
    too_large = ApiError(413, f"the request body is larger than this server's limit of {max_body_bytes} bytes",
                         code="request_too_large")
    declared = request.headers.get("content-length") or "0"
    if not (declared.isascii() and declared.isdigit()):
        raise bad_request("the Content-Length header is not a number")
    if len(declared) > 18 or int(declared) > max_body_bytes:  # 18 digits: int() of any length is not free
        raise too_large
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > max_body_bytes:
            raise too_large
    data = parse_json(bytes(body))
    if not isinstance(data, dict):
        raise bad_request("the body must be a JSON object")
    return data


def check_content_type(header: str) -> None:
    """application/json, in UTF-8 if a charset is named. A web page can send text/plain (or a form) to any
    address without asking the server first (no CORS preflight); JSON it can only send where CORS allows."""
    media_type, *parameters = (part.strip().lower() for part in header.split(";"))
    charsets = [value.strip('"') for name, _, value in (p.partition("=") for p in parameters) if name == "charset"]
    if media_type != "application/json" or any(charset not in ("utf-8", "utf8") for charset in charsets):
        raise ApiError(415, "send the body as JSON with the header 'Content-Type: application/json'",
                       code="unsupported_media_type")


def parse_json(body: bytes) -> object:
    """Strict JSON (no NaN or Infinity) nested at most MAX_NESTING deep."""
    try:
        data = json.loads(body, parse_constant=refuse_constant)
    except RecursionError:
        raise bad_request(f"the body nests deeper than {MAX_NESTING} levels") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, and ints past Python's digit limit
        raise bad_request(f"the body is not valid JSON: {error}") from None
    if nesting(data) > MAX_NESTING:
        raise bad_request(f"the body nests deeper than {MAX_NESTING} levels")
    return data


def refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def nesting(data: object) -> int:
    """How deep lists and objects nest (iteratively: the depth is what is being checked)."""
    deepest, todo = 0, [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_NESTING:
                todo.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return deepest
