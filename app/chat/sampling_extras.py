"""The sampling settings beyond temperature, top-p and max tokens (top-k, min-p, the penalties) and the JSON output
switch with its schema, as kept in the settings file. Values read back from the file are checked: one out of range
falls back to its default instead of failing the app."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields

ANY_JSON_OBJECT = '{"type": "object"}'
RANGES = {"top_k": (0, 1000), "min_p": (0.0, 1.0), "repetition_penalty": (0.5, 2.0),
          "presence_penalty": (-2.0, 2.0), "frequency_penalty": (-2.0, 2.0)}


@dataclass(frozen=True)
class SamplingExtras:
    top_k: int = 0  # 0: off
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    json_output: bool = False  # the reply is JSON: any object, or what json_schema accepts
    json_schema: str = ""  # the schema as JSON text; empty: any JSON object

    @classmethod
    def from_raw(cls, raw: object) -> "SamplingExtras":
        """From the settings file's object; a missing, mistyped or out-of-range value is its default."""
        raw = raw if isinstance(raw, dict) else {}
        values = {}
        for item in fields(cls):
            value = raw.get(item.name)
            if item.name in RANGES and is_number(value) and RANGES[item.name][0] <= value <= RANGES[item.name][1]:
                values[item.name] = int(value) if item.name == "top_k" else float(value)
            elif item.name == "json_output" and isinstance(value, bool):
                values[item.name] = value
            elif item.name == "json_schema" and isinstance(value, str):
                values[item.name] = value
        return cls(**values)

    def schema(self) -> str | None:
        """The JSON schema a request asks for (SamplingParams.json_schema), None when the switch is off."""
        if not self.json_output:
            return None
        return self.json_schema.strip() or ANY_JSON_OBJECT

    def schema_problem(self) -> str | None:
        """Why the schema box cannot be used, for the app to say before sending; None when it can."""
        schema = self.schema()
        if schema is None:
            return None
        try:
            value = json.loads(schema)
        except ValueError as error:
            return f"the JSON schema is not valid JSON: {error}"
        return None if isinstance(value, (dict, bool)) else "a JSON schema is an object, such as {\"type\": \"object\"}"

    def sampling_fields(self) -> dict:
        """Keyword arguments of engine_api.SamplingParams."""
        return {"top_k": self.top_k, "min_p": self.min_p, "repetition_penalty": self.repetition_penalty,
                "presence_penalty": self.presence_penalty, "frequency_penalty": self.frequency_penalty,
                "json_schema": self.schema()}


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
