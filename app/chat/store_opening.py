"""Open the conversation store whatever state its file is in: a file SQLite says is damaged (disk trouble, a half
copied backup) is moved aside, the user is told where it went, and the app starts with an empty store instead of
exiting; a healthy file that cannot be written (read-only, locked by another program) opens read-only. The
database, its journal files and its folder are readable by their owner only: conversations can hold anything a
user pasted."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from contextlib import closing
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
    """The store, and a message for the user when the old file could not be used as it is (else None). A
    database that SQLite can read but not write (a read-only file or folder, another program's lock) opens
    read-only; only one that fails SQLite's integrity check is moved aside."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        store = ConversationStore(path)
        store.conversations()  # reads the tables: a damaged file fails here if not at opening
    except (sqlite3.DatabaseError, OSError) as err:
        log.error("conversation database %s cannot be opened for writing: %s", path, err)
        store, message = open_unwritable(path, err)
    else:
        message = None
    try:
        make_owner_only(path)
    except OSError as err:  # a file this user does not own
        log.warning("cannot make %s owner-only: %s", path, err)
    return store, message


def open_unwritable(path: Path, err: Exception) -> tuple[ConversationStore, str]:
    if is_damaged(path):
        aside = move_aside(path)
        message = (f"Your saved conversations could not be read ({err}). The file was kept as {aside} and Wisp "
                   f"started with an empty conversation list.")
        return ConversationStore(path), message
    store = ConversationStore.read_only(path)
    shown = "cannot be read now, so none are shown" if store.is_in_memory else "are shown"
    message = (f"Your saved conversations are open read-only: {err}. They {shown}, but new messages cannot be "
               f"saved until {path} (and its folder) can be written again and Wisp is restarted.")
    return store, message


def is_damaged(path: Path) -> bool:
    """Whether SQLite says the file is damaged (PRAGMA integrity_check, or not a database at all). A file it
    cannot open or lock is not damaged: it may be read-only, or in use."""
    if not path.exists():
        return False
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1)) as db:
            return db.execute("PRAGMA integrity_check").fetchall() != [("ok",)]
    except sqlite3.DatabaseError as err:
        return any(words in str(err) for words in ("not a database", "malformed", "encrypted"))
