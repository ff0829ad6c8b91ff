"""Open the conversation store whatever state its file is in: a file SQLite cannot read (disk trouble, a half
copied backup) is moved aside, the user is told where it went, and the app starts with an empty store instead of
exiting. The database, its journal files and its folder are readable by their owner only: conversations can
hold anything a user pasted."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

from app.chat.conversation_store import ConversationStore

log = logging.getLogger(__name__)
JOURNAL_SUFFIXES = ("-wal", "-shm")


def make_owner_only(path: Path) -> None:
    """chmod 600 the database and its journal files, 700 its folder (no-op for what does not exist)."""
    if path.parent.exists():
        os.chmod(path.parent, 0o700)
    for file in (path, *(path.with_name(path.name + suffix) for suffix in JOURNAL_SUFFIXES)):
        if file.exists():
            os.chmod(file, 0o600)


def move_aside(path: Path) -> Path:
    """Rename the unreadable database (and its journal files) to NAME.corrupt-TIMESTAMP; returns the new name."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    for suffix in ("", *JOURNAL_SUFFIXES):
        source = path.with_name(path.name + suffix)
        if source.exists():
            source.rename(aside.with_name(aside.name + suffix))
    return aside


def open_store(path: Path) -> tuple[ConversationStore, str | None]:
    """The store, and a message for the user when the old file could not be read (else None)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        store = ConversationStore(path)
        store.conversations()  # reads the tables: a damaged file fails here if not at opening
    except sqlite3.DatabaseError as err:
        log.error("conversation database %s is unreadable: %s", path, err)
        aside = move_aside(path)
        store = ConversationStore(path)
        message = (f"Your saved conversations could not be read ({err}). The file was kept as {aside} and Wisp "
                   f"started with an empty conversation list.")
    else:
        message = None
    make_owner_only(path)
    return store, message
