"""The saved conversations as a Qt list model: a thin adapter over ConversationStore (rename by editing)."""

from __future__ import annotations

import time

from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, Signal

from app.chat.conversation_store import Conversation, ConversationStore
from app.icons import icon

ID_ROLE = Qt.ItemDataRole.UserRole


def age_text(timestamp: float, now: float | None = None) -> str:
    seconds = (now or time.time()) - timestamp
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"


class ConversationListModel(QAbstractListModel):
    renamed = Signal("qint64")  # a conversation's title was edited (the list re-sorted: views select it again)

    def __init__(self, store: ConversationStore, parent=None):
        super().__init__(parent)
        self._store = store
        self._rows: list[Conversation] = store.conversations()

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        conversation = self._rows[index.row()]
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.EditRole):
            return conversation.title
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"{conversation.mode} · {age_text(conversation.updated)}"
        if role == Qt.ItemDataRole.DecorationRole:
            return icon("code" if conversation.mode == "code" else "chat")
        if role == ID_ROLE:
            return conversation.id
        return None

    def flags(self, index: QModelIndex):
        return super().flags(index) | Qt.ItemFlag.ItemIsEditable

    def setData(self, index: QModelIndex, value, role: int = Qt.ItemDataRole.EditRole) -> bool:
        title = str(value).strip()
        if role != Qt.ItemDataRole.EditRole or not index.isValid() or not title:
            return False
        conversation_id = self._rows[index.row()].id
        self._store.update(conversation_id, title=title)
        self.refresh()
        self.renamed.emit(conversation_id)
        return True

    def conversation_at(self, row: int) -> Conversation:
        return self._rows[row]

    def row_of(self, conversation_id: int) -> int:
        return next((row for row, c in enumerate(self._rows) if c.id == conversation_id), -1)

    def refresh(self) -> None:
        self.beginResetModel()
        self._rows = self._store.conversations()
        self.endResetModel()

    def delete(self, conversation_id: int) -> None:
        self._store.delete(conversation_id)
        self.refresh()
