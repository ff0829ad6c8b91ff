"""One place for settings: the engine and the app read no WISP_* environment variable but the three documented for
users, and docs/configuration.md's table names every EngineOptions field."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from engine.config import EngineOptions

ROOT = Path(__file__).resolve().parents[1]
USER_VARIABLES = {"WISP_DATA_DIR", "WISP_API_KEY", "WISP_REMOTE_API_KEY"}
DOC = ROOT / "docs" / "configuration.md"


def variables_named_in(folder: str) -> dict[str, list[str]]:
    """WISP_* name -> the files of folder/ (Python) that name it."""
    found: dict[str, list[str]] = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        for name in set(re.findall(r"\bWISP_[A-Z0-9_]+", path.read_text(encoding="utf-8"))):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_the_engine_and_the_app_name_only_the_user_variables():
    named = {**variables_named_in("engine"), **variables_named_in("app")}
    assert set(named) <= USER_VARIABLES, {name: files for name, files in named.items() if name not in USER_VARIABLES}


def test_the_doc_names_every_setting_and_user_variable():
    text = DOC.read_text(encoding="utf-8")
    missing = [field.name for field in dataclasses.fields(EngineOptions) if f"`{field.name}`" not in text]
    assert not missing, f"docs/configuration.md does not name these EngineOptions fields: {missing}"
    assert all(f"`{name}`" in text for name in USER_VARIABLES)
