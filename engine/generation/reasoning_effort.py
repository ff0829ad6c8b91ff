"""How long a reasoning model thinks: gpt-oss's chat template takes `reasoning_effort` (low, medium, high,
engine.request_checks.REASONING_EFFORTS) and writes it into the system message."""

from __future__ import annotations


def takes_reasoning_effort(tokenizer) -> bool:
    """Whether the model's chat template reads the `reasoning_effort` variable (gpt-oss's does)."""
    return "reasoning_effort" in getattr(tokenizer, "chat_template_source", "")


def template_variables(reasoning_effort: str | None) -> dict:
    """The chat template's variables for a request: none unless an effort was asked for."""
    return {"reasoning_effort": reasoning_effort} if reasoning_effort is not None else {}
