"""Each entry of settings.json checked on its own: a bad entry falls back to its default alone (and is named),
so that one wrong value never resets the others (remote servers and their API keys among them)."""

from __future__ import annotations

import math
from typing import Any, Callable

from app.chat.sampling_extras import SamplingExtras
from app.engine_api import MAX_TEMPERATURE, REASONING_EFFORTS
from app.mcp.server_config import McpConfigError, servers_from_settings
from app.remote_server import RemoteServer
from app.speculation_choice import SPECULATIVE_CHOICES, old_setting

THEMES = ("system", "light", "dark")
MODES = ("chat", "code")
DENSE_QUANTS = ("q8_0",)  # EngineOptions.dense_quant for a checkpoint (the app's Model → Q8_0 dense weights)
GGUF_ENGINES = ("auto", "wisp", "llama.cpp")  # EngineOptions.backend for a .gguf file: auto picks Wisp's when it can
MAX_WHOLE = 2**63 - 1


class BadEntry(ValueError):
    """A value that does not fit its entry."""


def whole(low: int, high: int = MAX_WHOLE) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise BadEntry(f"a whole number from {low} to {high}")
        return value

    return check


def real(low: float, high: float, is_low_open: bool = False) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or not (low < value if is_low_open else low <= value) or value > high:
            raise BadEntry(f"a number from {low} to {high}")
        return float(value)

    return check


def one_of(choices: tuple) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in choices:
            raise BadEntry(f"one of {', '.join(map(repr, choices))}")
        return value

    return check


def optional(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else check(value)


def text(value: Any) -> str:
    if not isinstance(value, str):
        raise BadEntry("text")
    return value


def speculation(value: Any) -> str:
    return one_of(SPECULATIVE_CHOICES)(old_setting(value))


def switch(value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadEntry("true or false")
    return value


def folders(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(folder, str) for folder in value):
        raise BadEntry("a list of folder paths")
    return tuple(value)


def servers(value: Any) -> tuple[RemoteServer, ...]:
    """Remote servers; each needs a text url, and an api_key that is text or null."""
    if not isinstance(value, list):
        raise BadEntry("a list of servers")
    for server in value:
        if not isinstance(server, dict) or not isinstance(server.get("url"), str) or not server["url"] \
                or not isinstance(server.get("api_key"), (str, type(None))):
            raise BadEntry('a list of {"url": ..., "api_key": ...} servers')
    return tuple(RemoteServer(server["url"], server.get("api_key") or None) for server in value)


def mcp_servers(value: Any):
    """MCP servers: each {"name", "command", "args", "env"} (stdio) or {"name", "url", "headers"}, with "approval"."""
    try:
        return servers_from_settings(value)
    except McpConfigError as err:
        raise BadEntry(f"a list of MCP servers ({err})") from None


def sampling_extras(value: Any) -> SamplingExtras:
    """The extra sampling settings; within the object, a value out of range falls back to its default alone."""
    if not isinstance(value, dict):
        raise BadEntry("an object of sampling settings")
    return SamplingExtras.from_raw(value)


CHECKS: dict[str, Callable[[Any], Any]] = {
    "budget_bytes": optional(whole(1)), "host_budget_bytes": optional(whole(1)), "model_folders": folders,
    "theme": one_of(THEMES), "last_model": optional(text), "mode": one_of(MODES),
    "temperature": real(0.0, MAX_TEMPERATURE), "top_p": real(0.0, 1.0, is_low_open=True),
    "max_tokens": whole(1, 2**31 - 1),
    "reasoning_effort": optional(one_of(REASONING_EFFORTS)), "thinking": switch,
    "last_conversation_id": optional(whole(0)), "remote_servers": servers, "server_port": whole(0, 65535),
    "repeatable": switch, "speculative": speculation, "gguf_engine": one_of(GGUF_ENGINES),
    "window_geometry": optional(text),
    "dense_quant": optional(one_of(DENSE_QUANTS)),
    "sampling_extras": sampling_extras, "mcp_servers": mcp_servers,
}


def checked_entries(raw: dict) -> tuple[dict[str, Any], list[str]]:
    """The entries of `raw` that fit (unknown keys are ignored) and a line for each one that does not."""
    values, problems = {}, []
    for name, check in CHECKS.items():
        if name not in raw:
            continue
        try:
            values[name] = check(raw[name])
        except BadEntry as error:
            problems.append(f"{name} must be {error}, not {shorten(raw[name])}")
    return values, problems


def shorten(value: Any, limit: int = 40) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit] + "…"
