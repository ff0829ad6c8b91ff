"""The one door to the engine: `api()` returns `engine.api`, imported on first use.

Importing engine.api imports torch (about two seconds), so no app module imports it at import time: the window
opens first and a background task warms the import up (see main_window)."""

from __future__ import annotations

import importlib
from types import ModuleType


def api() -> ModuleType:
    return importlib.import_module("engine.api")


def parse_size(text: str) -> int:
    """engine.api.parse_size ("6 GiB", "900MiB"), for widgets built before the engine API is imported."""
    return api().parse_size(text)


def format_bytes(num_bytes: float) -> str:
    """engine.api.format_bytes, for widgets built before the engine API is imported."""
    return api().format_bytes(num_bytes)
