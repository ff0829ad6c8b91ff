"""The open conversation: its messages in memory, mirrored to the ConversationStore as they change.
Views observe its signals. GUI thread only."""

from __future__ import annotations

import sqlite3

from PySide6.QtCore import QObject, Signal

from app.chat.context_fit import DEFAULT_POLICY
from app.chat.conversation_store import Conversation, ConversationStore, Message

TITLE_LENGTH = 48


def title_from(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "New chat")
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1] + "…"


class ConversationModel(QObject):
    reset = Signal()  # another conversation (or none) is open
    message_appended = Signal("qint64")
    message_changed = Signal("qint64")
    truncated = Signal("qint64")  # messages from this index on are gone
    conversation_saved = Signal(object)  # Conversation: created, renamed or touched (the list re-sorts)
    context_policy_changed = Signal(str)  # the open chat's policy for a full context (app.chat.context_fit)
    save_failed = Signal(str)  # why a change stayed in memory only (a full disk, a read-only store)

    def __init__(self, store: ConversationStore, parent: QObject | None = None):
        super().__init__(parent)
        self.store = store
        self._conversation: Conversation | None = None
        self._messages: list[Message] = []
        self._new_chat_policy = DEFAULT_POLICY  # a chat not saved yet gets it when its first message is

    @property
    def conversation(self) -> Conversation | None:
        return self._conversation

    @property
    def messages(self) -> list[Message]:
        return list(self._messages)

    @property
    def context_policy(self) -> str:
        return self._new_chat_policy if self._conversation is None else self._conversation.context_policy

    def set_context_policy(self, policy: str) -> None:
        if self._conversation is None:
            self._new_chat_policy = policy
        elif policy != self._conversation.context_policy:
            self.store.update(self._conversation.id, context_policy=policy)
            self._conversation = self.store.get(self._conversation.id)
        self.context_policy_changed.emit(policy)

    def open(self, conversation_id: int) -> bool:
        conversation = self.store.get(conversation_id)
        if conversation is None:
            return False
        self._conversation, self._messages = conversation, self.store.messages(conversation_id)
        self.reset.emit()
        return True

    def start_new(self) -> None:
        """Nothing open; the next message creates the conversation (so empty chats never pile up)."""
        self._conversation, self._messages = None, []
        self._new_chat_policy = DEFAULT_POLICY
        self.reset.emit()

    def ensure_conversation(self, mode: str, system_prompt: str, first_text: str) -> Conversation:
        if self._conversation is None:
            self._conversation = self.store.create(title_from(first_text), mode, system_prompt, self._new_chat_policy)
            self.conversation_saved.emit(self._conversation)
        elif system_prompt != self._conversation.system_prompt or mode != self._conversation.mode:
            self.store.update(self._conversation.id, system_prompt=system_prompt, mode=mode)
            self._conversation = self.store.get(self._conversation.id)
        return self._conversation

    def append(self, message: Message) -> int:
        position = len(self._messages)
        self._messages.append(self.store.add_message(self._conversation.id, position, message))
        self.message_appended.emit(position)
        self.conversation_saved.emit(self.store.get(self._conversation.id))
        return position

    def set_content(self, index: int, content: str, info: dict | None = None, persist: bool = True) -> None:
        message = self._messages[index].with_changes(content=content)
        if info is not None:
            message = message.with_changes(info=info)
        self._messages[index] = message
        if persist:
            self._write(self.store.save_message, self._conversation.id, message)
        self.message_changed.emit(index)

    def truncate(self, index: int) -> None:
        self._write(self.store.delete_messages_from, self._conversation.id, index)
        del self._messages[index:]
        self.truncated.emit(index)

    def _write(self, write, *args) -> None:
        """A change the view already shows: if the store refuses it, it stays in memory and save_failed says why."""
        try:
            write(*args)
        except sqlite3.Error as err:
            self.save_failed.emit(why_not_saved(err))


def why_not_saved(error: sqlite3.Error) -> str:
    """A store error in words a user can act on."""
    text = str(error)
    if "full" in text:
        return "the disk is full; free some space"
    if "readonly" in text or "read-only" in text or "query_only" in text:
        return "the saved conversations are open read-only"
    if "locked" in text:
        return "another program is using the conversation database"
    return f"the conversation database refused it ({text})"
