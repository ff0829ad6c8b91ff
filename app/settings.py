"""The user's settings (budget, model folders, theme, last model, generation defaults), kept as JSON in
platformdirs' config folder. Unknown or malformed entries fall back to defaults instead of failing."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from app.atomic_write import write_text_atomic

log = logging.getLogger(__name__)
THEMES = ("system", "light", "dark")
MODES = ("chat", "code")


@dataclass(frozen=True)
class AppSettings:
    budget_bytes: int | None = None  # None: chosen from the detected hardware
    model_folders: tuple[str, ...] = ()
    theme: str = "system"
    last_model: str | None = None  # None: the bundled demo model
    mode: str = "chat"
    temperature: float = 0.7
    top_p: float = 0.95
    max_tokens: int = 512
    last_conversation_id: int | None = None

    def with_changes(self, **changes) -> "AppSettings":
        return replace(self, **changes)


def _clean(raw: dict) -> dict:
    known = {f.name for f in fields(AppSettings)}
    values = {key: value for key, value in raw.items() if key in known}
    if "model_folders" in values:
        values["model_folders"] = tuple(str(folder) for folder in values["model_folders"])
    if values.get("theme") not in THEMES:
        values.pop("theme", None)
    if values.get("mode") not in MODES:
        values.pop("mode", None)
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
