"""The one door to the engine: `api()` returns `engine.api`.

engine.api imports no torch (torch loads with the first model), so importing it costs little and app modules
may import its names directly."""

from __future__ import annotations

from types import ModuleType

import engine.api
from engine.api import MAX_TEMPERATURE, REASONING_EFFORTS, ExpertMode, format_bytes, parse_size

__all__ = ["api", "format_bytes", "parse_size", "MAX_TEMPERATURE", "REASONING_EFFORTS", "ExpertMode"]


def api() -> ModuleType:
    return engine.api
