"""System prompt presets from resources/prompts/*.md: the first line ("# Title") names the preset, the rest is
the prompt. Each mode starts from its preset: chat -> chat.md, code -> code-assistant.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.resource_paths import PROMPTS

MODE_PRESETS = {"chat": "chat", "code": "code-assistant"}


@dataclass(frozen=True)
class PromptPreset:
    key: str
    title: str
    prompt: str


def read_preset(path: Path) -> PromptPreset:
    first, _, rest = path.read_text(encoding="utf-8").partition("\n")
    return PromptPreset(path.stem, first.lstrip("# ").strip() or path.stem, rest.strip())


def load_presets(folder: Path = PROMPTS) -> dict[str, PromptPreset]:
    return {path.stem: read_preset(path) for path in sorted(folder.glob("*.md"))}


def preset_for_mode(mode: str, presets: dict[str, PromptPreset]) -> PromptPreset | None:
    return presets.get(MODE_PRESETS.get(mode, ""))
