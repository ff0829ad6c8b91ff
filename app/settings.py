"""The user's settings (budget, model folders, remote servers, theme, last model, generation defaults), kept as
JSON in platformdirs' config folder. Unknown entries are ignored; a malformed one falls back to its default alone
(app.settings_entries).
Remote servers' API keys (and MCP servers' env and headers) are stored in this file as plain text (written
owner-only, see atomic_write)."""

from __future__ import annotations

import json
import logging
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from app.atomic_write import remove_stale_temporaries, write_text_atomic
from app.chat.sampling_extras import SamplingExtras
from app.mcp.server_config import McpServerConfig
from app.remote_server import RemoteServer
from app.settings_entries import GGUF_ENGINES, MODES, THEMES, checked_entries

__all__ = ["AppSettings", "SettingsStore", "GGUF_ENGINES", "MODES", "THEMES"]
log = logging.getLogger(__name__)


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
    dense_quant: str | None = None  # checkpoints' dense weights quantized at load (DENSE_QUANTS); changes outputs
    window_geometry: str | None = None  # QWidget.saveGeometry(), base64: size, position and maximized state
    speculative: str = "off"  # Model → Draft tokens: one of app.speculation_choice.SPECULATIVE_CHOICES
    mcp_servers: tuple[McpServerConfig, ...] = ()  # MCP servers whose tools tool-capable models are offered

    def with_changes(self, **changes) -> "AppSettings":
        return replace(self, **changes)

    def api_key_for(self, model: str | None) -> str | None:
        """The stored API key of a remote server's URL (None for local models and keyless servers)."""
        return next((server.api_key for server in self.remote_servers if server.url == model), None)


class SettingsStore:
    """settings.json. `load` keeps every entry that fits and lists the others in `problems`; before the first
    save after such a load the old file is kept aside as settings.json.bad-DATE, so nothing is lost."""

    def __init__(self, path: Path):
        self.path = path
        self.problems: list[str] = []
        self.save_error: str | None = None  # why the last save failed (a read-only or full disk), else None

    def load(self) -> AppSettings:
        self.problems = []
        for removed in remove_stale_temporaries(self.path):
            log.info("removed %s, left by a save that was killed", removed)
        if not self.path.exists():
            return AppSettings()
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as err:
            self.problems = [f"the file cannot be read ({type(err).__name__}: {err})"]
            raw = {}
        if not isinstance(raw, dict):
            self.problems, raw = [f"the file holds {type(raw).__name__}, not an object of settings"], {}
        values, problems = checked_entries(raw)
        self.problems += problems
        for problem in self.problems:
            log.warning("settings %s: %s", self.path, problem)
        return AppSettings(**values)

    def save(self, settings: AppSettings) -> None:
        """Write the settings (atomically); a disk that refuses is logged and kept in `save_error`, not raised."""
        try:
            if self.problems and self.path.exists():
                self.keep_aside()
            write_text_atomic(self.path, json.dumps(asdict(settings), indent=2))
            self.save_error = None
        except OSError as err:
            self.save_error = f"{err.strerror or err} ({self.path})"
            log.warning("cannot save the settings: %s", self.save_error)

    def keep_aside(self) -> Path:
        aside = self.path.with_name(f"{self.path.name}.bad-{time.strftime('%Y%m%d-%H%M%S')}")
        shutil.copy2(self.path, aside)
        self.problems = []
        log.warning("kept the settings file with bad entries as %s", aside)
        return aside
