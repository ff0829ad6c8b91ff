"""Folders of the files shipped beside the code (themes, icons, prompt presets)."""

from __future__ import annotations

from pathlib import Path

RESOURCES = Path(__file__).resolve().parents[1] / "resources"
THEMES = RESOURCES / "themes"
ICONS = RESOURCES / "icons"
PROMPTS = RESOURCES / "prompts"
