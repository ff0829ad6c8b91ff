"""Write a file so that a crash leaves either the old or the new content, never half of one."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

STALE_AFTER_S = 60.0  # a temporary file older than this belongs to a write that was killed, not to one under way


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=temporary_prefix(path), suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def temporary_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_stale_temporaries(path: Path, stale_after_s: float = STALE_AFTER_S) -> list[Path]:
    """Delete the temporary files that killed writes of `path` left beside it (they may hold secrets, such as
    the settings' API keys); returns those removed. Files that cannot be removed are left alone."""
    removed, now = [], time.time()
    for candidate in path.parent.glob(f"{temporary_prefix(path)}*.tmp"):
        try:
            if now - candidate.stat().st_mtime >= stale_after_s:
                candidate.unlink()
                removed.append(candidate)
        except OSError:
            continue
    return removed
