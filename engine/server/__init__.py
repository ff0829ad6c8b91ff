"""`wisp serve`: an OpenAI-compatible HTTP server in front of one loaded engine.api.Engine.

Exports are lazy so that `engine.cli.serve` (the `wisp serve` command) imports without the optional
server dependencies (starlette, uvicorn, pydantic: `pip install 'wisp[server]'`)."""

from __future__ import annotations

_EXPORTS = {
    "create_app": "engine.server.app",
    "ServerLimits": "engine.server.limits",
    "ServerHandle": "engine.server.runner",
    "start_server": "engine.server.runner",
    "serve_forever": "engine.server.runner",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'engine.server' has no attribute '{name}'")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
