"""Files only their owner may read: logs and crash reports quote conversations, paths and errors. Folders are
0700 and files 0600, whatever the umask, also for files that already exist."""

from __future__ import annotations

import os
from pathlib import Path

OWNER_FOLDER, OWNER_FILE = 0o700, 0o600


def private_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=OWNER_FOLDER)
    os.chmod(folder, OWNER_FOLDER)
    return folder


def owner_only_opener(path: str, flags: int) -> int:
    """An `opener` for open(): new files are created 0600, and an existing one is narrowed to 0600."""
    descriptor = os.open(path, flags, OWNER_FILE)
    os.fchmod(descriptor, OWNER_FILE)
    return descriptor


def open_private(path: Path, mode: str = "a", **kwargs):
    """open() for a file in a private folder: the folder made 0700, the file 0600."""
    private_folder(path.parent)
    return open(path, mode, opener=owner_only_opener, **kwargs)
