"""A remote OpenAI-compatible server (vLLM, llama.cpp's server, another Wisp) chosen like a model: its URL is
the "model" the loader is given, and the optional API key is kept with it in the settings file."""

from __future__ import annotations

from dataclasses import dataclass, field

URL_EXAMPLE = "http://gpu-box:8000/v1"


@dataclass(frozen=True)
class RemoteServer:
    url: str  # the OpenAI base URL, usually ending in /v1
    api_key: str | None = field(default=None, repr=False)

