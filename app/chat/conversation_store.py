"""Conversations in SQLite under the app's data folder. Every change is committed at once (WAL journal), so
a crash loses at most the last second of a reply that was still streaming. Plain Python, GUI thread only."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from app.chat.image_store import ImageStore

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, mode TEXT NOT NULL, system_prompt TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY, conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    position INTEGER NOT NULL, role TEXT NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL,
    info TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, position);
CREATE TABLE IF NOT EXISTS counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
# A column added since the first schema: a database from an older Wisp gains it (or, read-only, reads the default).
POLICY_COLUMN = ("context_policy", "TEXT NOT NULL DEFAULT 'drop_oldest'", "'drop_oldest'")
CONVERSATION_COLUMNS = "id, title, mode, system_prompt, created, updated"


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    mode: str  # "chat" | "code"
    system_prompt: str
    created: float
    updated: float
    context_policy: str = "drop_oldest"  # app.chat.context_fit.POLICIES: what to do when the context is full


@dataclass(frozen=True)
class Message:
    """role: "user" | "assistant"; kind: "chat" or "completion" (raw code continuation);
    info: finish reason, tok/s, time to first token, token counts, error; a user message's "images": the
    digests of its images in the store's ImageStore."""

    role: str
    content: str
    kind: str = "chat"
    info: dict = field(default_factory=dict)
    id: int | None = None

    @property
    def is_empty_failure(self) -> bool:
        """A reply that failed before it said anything: not part of what the model reads, nor of an export."""
        return self.role == "assistant" and not self.content and self.info.get("reason") == "error"

    def with_changes(self, **changes) -> "Message":
        return replace(self, **changes)


class ConversationStore:
    """`is_read_only`: opened with read_only() (a read-only file or folder, or a database another program
    locks); every write then raises sqlite3.OperationalError, which callers report. `images`: the messages'
    images, in the "images" folder beside the database."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.images = ImageStore(path.parent / "images")
        self._db = sqlite3.connect(path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)
        self._columns = f"{CONVERSATION_COLUMNS}, {self._policy_column()}"
        self.is_read_only = self.is_in_memory = False

    def _policy_column(self) -> str:
        name, definition, default = POLICY_COLUMN
        if name in {row[1] for row in self._db.execute("PRAGMA table_info(conversations)")}:
            return name
        try:
            with self._db:
                self._db.execute(f"ALTER TABLE conversations ADD COLUMN {name} {definition}")
        except sqlite3.OperationalError:  # a database we may only read
            return f"{default} AS {name}"
        return name

    @classmethod
    def read_only(cls, path: Path) -> "ConversationStore":
        """The database as it is, never written (SQLite's mode=ro; immutable when not even its journal can be
        opened); an empty store in memory when it cannot be read at all (locked by another program)."""
        store = cls.__new__(cls)
        store.is_read_only, store.is_in_memory = True, False
        store.images = ImageStore(path.parent / "images")
        for query in ("mode=ro", "immutable=1"):
            try:
                store._db = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=1)
                store._columns = f"{CONVERSATION_COLUMNS}, {store._policy_column()}"
                store.conversations()
                return store
            except sqlite3.DatabaseError:
                store._db.close()
        store._db, store.is_in_memory = sqlite3.connect(":memory:"), True
        store._db.executescript(SCHEMA)
        store._db.execute("PRAGMA query_only=ON")
        store._columns = f"{CONVERSATION_COLUMNS}, {store._policy_column()}"
        return store

    def close(self) -> None:
        self._db.close()

    def create(self, title: str, mode: str, system_prompt: str, context_policy: str = "drop_oldest") -> Conversation:
        """A new conversation whose id no earlier conversation had, deleted ones included (settings keep the last
        one's id, so a reused id would open another chat)."""
        now = time.time()
        with self._db:
            conversation_id = self._next_conversation_id()
            self._db.execute(
                "INSERT INTO conversations (id, title, mode, system_prompt, created, updated, context_policy) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", (conversation_id, title, mode, system_prompt, now, now,
                                                 context_policy))
            self._db.execute("INSERT OR REPLACE INTO counters (name, value) VALUES ('last_conversation_id', ?)",
                             (conversation_id,))
        return Conversation(conversation_id, title, mode, system_prompt, now, now, context_policy)

    def _next_conversation_id(self) -> int:
        """One more than the highest id ever given (the counter) or held now (a database older than the counter)."""
        (highest,) = self._db.execute(
            "SELECT max(coalesce((SELECT max(id) FROM conversations), 0), "
            "coalesce((SELECT value FROM counters WHERE name = 'last_conversation_id'), 0))").fetchone()
        return highest + 1

    def conversations(self) -> list[Conversation]:
        rows = self._db.execute(f"SELECT {self._columns} FROM conversations ORDER BY updated DESC, id DESC")
        return [Conversation(*row) for row in rows]

    def get(self, conversation_id: int) -> Conversation | None:
        row = self._db.execute(f"SELECT {self._columns} FROM conversations WHERE id = ?",
                               (conversation_id,)).fetchone()
        return Conversation(*row) if row else None

    def update(self, conversation_id: int, **columns) -> None:
        allowed = {"title", "mode", "system_prompt", "context_policy"}
        assignments = ", ".join(f"{name} = ?" for name in columns if name in allowed)
        values = [columns[name] for name in columns if name in allowed]
        with self._db:
            self._db.execute(f"UPDATE conversations SET {assignments}, updated = ? WHERE id = ?",
                             (*values, time.time(), conversation_id))

    def delete(self, conversation_id: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        self.images.remove_unused(self.image_digests())

    def image_digests(self) -> set[str]:
        """The images any saved message names."""
        rows = self._db.execute("SELECT info FROM messages WHERE info LIKE '%\"images\"%'")
        return {digest for (info,) in rows for digest in json.loads(info).get("images", [])}

    def messages(self, conversation_id: int) -> list[Message]:
        rows = self._db.execute("SELECT id, role, kind, content, info FROM messages WHERE conversation_id = ? "
                                "ORDER BY position", (conversation_id,))
        return [Message(role, content, kind, json.loads(info), id) for id, role, kind, content, info in rows]

    def add_message(self, conversation_id: int, position: int, message: Message) -> Message:
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO messages (conversation_id, position, role, kind, content, info, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conversation_id, position, message.role, message.kind, message.content, json.dumps(message.info),
                 time.time()))
            self._touch(conversation_id)
        return message.with_changes(id=cursor.lastrowid)

    def save_message(self, conversation_id: int, message: Message) -> None:
        with self._db:
            self._db.execute("UPDATE messages SET content = ?, info = ? WHERE id = ?",
                             (message.content, json.dumps(message.info), message.id))
            self._touch(conversation_id)

    def delete_messages_from(self, conversation_id: int, position: int) -> None:
        with self._db:
            self._db.execute("DELETE FROM messages WHERE conversation_id = ? AND position >= ?",
                             (conversation_id, position))

    def _touch(self, conversation_id: int) -> None:
        self._db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (time.time(), conversation_id))
