"""A request's say in how a reasoning model thinks, as chat-template variables: gpt-oss's template takes
`reasoning_effort` (low, medium, high: engine.request_checks.REASONING_EFFORTS) and writes it into the system
message; Qwen3's takes `enable_thinking` (false: the reply skips its `<think>` block)."""

from __future__ import annotations


def takes_reasoning_effort(tokenizer) -> bool:
    """Whether the model's chat template reads the `reasoning_effort` variable (gpt-oss's does)."""
    return "reasoning_effort" in getattr(tokenizer, "chat_template_source", "")


def has_thinking_switch(tokenizer) -> bool:
    """Whether the model's chat template reads `enable_thinking` (Qwen3's does)."""
    return "enable_thinking" in getattr(tokenizer, "chat_template_source", "")


def template_variables(request) -> dict:
    """The chat template's variables for a request: only those it asked for (the template's defaults otherwise)."""
    variables = {}
    if request.reasoning_effort is not None:
        variables["reasoning_effort"] = request.reasoning_effort
    if request.enable_thinking is not None:
        variables["enable_thinking"] = request.enable_thinking
    return variables
