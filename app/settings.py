"""The user's settings (budget, model folders, remote servers, theme, last model, generation defaults), kept as
JSON in platformdirs' config folder. Unknown or malformed entries fall back to defaults instead of failing.
Remote servers' API keys are stored in this file as plain text (written owner-only, see atomic_write)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from app.atomic_write import write_text_atomic
from app.chat.sampling_extras import SamplingExtras
from app.engine_api import REASONING_EFFORTS
from app.remote_server import RemoteServer

log = logging.getLogger(__name__)
THEMES = ("system", "light", "dark")
MODES = ("chat", "code")
GGUF_ENGINES = ("auto", "wisp", "llama.cpp")  # EngineOptions.backend for a .gguf file: auto picks Wisp's when it can


@dataclass(frozen=True)
class AppSettings:
    budget_bytes: int | None = None  # None: chosen from the detected hardware
    host_budget_bytes: int | None = None  # most host RAM for experts (--host-budget); None: what the machine spares
    model_folders: tuple[str, ...] = ()
    theme: str = "system"
    last_model: str | None = None  # None: the bundled demo model
    mode: str = "chat"
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    reasoning_effort: str | None = None  # one of REASONING_EFFORTS (gpt-oss templates); None: the template default
    thinking: bool = True  # the Think switch, for chat templates that take enable_thinking (Qwen3)
    sampling_extras: SamplingExtras = SamplingExtras()  # top-k, min-p, penalties, JSON output and its schema
    last_conversation_id: int | None = None
    remote_servers: tuple[RemoteServer, ...] = ()
    server_port: int = 8000  # the app's OpenAI-compatible server (0: any free port)
    repeatable: bool = True  # CUDA: deterministic kernels (the same prompt, the same reply); False is faster
    gguf_engine: str = "auto"  # which engine runs a .gguf file (one of GGUF_ENGINES)
    window_geometry: str | None = None  # QWidget.saveGeometry(), base64: size, position and maximized state

    def with_changes(self, **changes) -> "AppSettings":
        return replace(self, **changes)

    def api_key_for(self, model: str | None) -> str | None:
        """The stored API key of a remote server's URL (None for local models and keyless servers)."""
        return next((server.api_key for server in self.remote_servers if server.url == model), None)


def _clean(raw: dict) -> dict:
    known = {f.name for f in fields(AppSettings)}
    values = {key: value for key, value in raw.items() if key in known}
    values["sampling_extras"] = SamplingExtras.from_raw(values.get("sampling_extras"))
    if "model_folders" in values:
        values["model_folders"] = tuple(str(folder) for folder in values["model_folders"])
    if values.get("theme") not in THEMES:
        values.pop("theme", None)
    if values.get("mode") not in MODES:
        values.pop("mode", None)
    if values.get("reasoning_effort") not in (None, *REASONING_EFFORTS):
        values.pop("reasoning_effort")
    if values.get("gguf_engine") not in GGUF_ENGINES:
        values.pop("gguf_engine", None)
    if "remote_servers" in values:
        values["remote_servers"] = tuple(RemoteServer(str(server["url"]), server.get("api_key") or None)
                                         for server in values["remote_servers"]
                                         if isinstance(server, dict) and server.get("url"))
    if not isinstance(values.get("window_geometry") or "", str):
        values.pop("window_geometry")
    for switch in ("repeatable", "thinking"):
        if not isinstance(values.get(switch, True), bool):
            values.pop(switch)
    host_budget = values.get("host_budget_bytes")
    if host_budget is not None and (not isinstance(host_budget, int) or isinstance(host_budget, bool) or host_budget < 1):
        values.pop("host_budget_bytes")
    if not isinstance(values.get("server_port"), int) or not 0 <= values["server_port"] <= 65535:
        values.pop("server_port", None)
    return values


class SettingsStore:
    def __init__(self, path: Path):
        self.path = path

    def load(self) -> AppSettings:
        if not self.path.exists():
            return AppSettings()
        try:
            return AppSettings(**_clean(json.loads(self.path.read_text(encoding="utf-8"))))
        except (ValueError, TypeError) as err:
            log.warning("ignoring unreadable settings %s: %s", self.path, err)
            return AppSettings()

    def save(self, settings: AppSettings) -> None:
        write_text_atomic(self.path, json.dumps(asdict(settings), indent=2))
