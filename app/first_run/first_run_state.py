"""Whether this user has seen the welcome dialog: a small marker file beside settings.json in the config folder
(kept apart from AppSettings so that the window's settings saves can never reset it)."""

from __future__ import annotations

import json
from pathlib import Path

from app.atomic_write import write_text_atomic

STATE_FILE = "first_run.json"


def claim_first_run(config_dir: Path) -> bool:
    """True exactly once per config folder: the first call records that the welcome dialog is being shown."""
    marker = config_dir / STATE_FILE
    if marker.exists():
        return False
    write_text_atomic(marker, json.dumps({"welcome_shown": True}))
    return True
