"""Structured output requests -> the JSON schema the engine constrains the reply to: OpenAI's `response_format`
(json_object, json_schema), vLLM's `guided_json` and llama.cpp's `json_schema`."""

from __future__ import annotations

import json

from engine.server.api_errors import ApiError, bad_request
from engine.server.body import parse_json

ANY_JSON_OBJECT = '{"type": "object"}'
RESPONSE_FORMATS = ("text", "json_object", "json_schema")


def requested_schema(response_format: dict | None, extra: dict | None) -> str | None:
    """The schema as JSON text, or None for free text; 400 naming the field for a form Wisp does not know."""
    schemas = [schema for schema in (format_schema(response_format), extension_schema(extra)) if schema]
    if len(schemas) > 1:
        raise bad_request("ask for structured output once: response_format, guided_json or json_schema",
                          "response_format")
    return schemas[0] if schemas else None


def format_schema(response_format: dict | None) -> str | None:
    kind = (response_format or {}).get("type", "text")
    if kind not in RESPONSE_FORMATS:
        raise bad_request(f"response_format type must be one of {', '.join(RESPONSE_FORMATS)}, not {kind!r}",
                          "response_format.type")
    if kind == "text":
        return None
    if kind == "json_object":
        return ANY_JSON_OBJECT
    spec = response_format.get("json_schema")
    if not isinstance(spec, dict):
        raise bad_request('json_schema needs {"name": ..., "schema": {...}}', "response_format.json_schema")
    return schema_text(spec.get("schema", {"type": "object"}), "response_format.json_schema.schema")


def extension_schema(extra: dict | None) -> str | None:
    """vLLM's guided_json and llama.cpp's json_schema (a schema object, or its JSON text)."""
    for name in ("guided_json", "json_schema"):
        value = (extra or {}).get(name)
        if isinstance(value, str):
            try:
                value = parse_json(value.encode("utf-8", "surrogatepass"))
            except ApiError as error:
                raise bad_request(f"{name}: {error.message.replace('the body', 'the schema')}", name) from None
        if value is not None:
            return schema_text(value, name)
    return None


def schema_text(schema: object, field: str) -> str:
    if not isinstance(schema, (dict, bool)):
        raise bad_request("a JSON schema is an object", field)
    return json.dumps(schema, ensure_ascii=False)


def taken_extension_fields() -> tuple[str, ...]:
    """Fields outside OpenAI's API read here (not to be reported as ignored)."""
    return ("guided_json", "json_schema")
