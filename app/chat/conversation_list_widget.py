"""The list of saved conversations: switch, new, rename (edit in place), delete, export as Markdown or JSON."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QModelIndex, Qt, Signal, Slot
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QAbstractItemView, QFileDialog, QHBoxLayout, QLabel, QListView, QMenu, QMessageBox,
                               QToolButton, QVBoxLayout, QWidget)

from app.atomic_write import write_text_atomic
from app.chat.conversation_list_model import ID_ROLE, ConversationListModel
from app.chat.conversation_store import ConversationStore
from app.chat.export import to_json, to_markdown

EXPORT_FORMATS = {"markdown": ("Markdown (*.md)", ".md", to_markdown), "json": ("JSON (*.json)", ".json", to_json)}


class ConversationListWidget(QWidget):
    conversation_activated = Signal("qint64")
    conversation_deleted = Signal("qint64")

    def __init__(self, store: ConversationStore, parent: QWidget | None = None):
        super().__init__(parent)
        self._store = store
        self.model = ConversationListModel(store, self)
        self.view = QListView(self, objectName="conversationList")
        self.view.setModel(self.model)
        self.view.setAccessibleName("Conversations")
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.EditKeyPressed)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.view.setUniformItemSizes(True)
        self.rename_button = QToolButton(self, text="Rename")
        self.delete_button = QToolButton(self, text="Delete")
        self.export_button = QToolButton(self, text="Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.export_button.setMenu(self._export_menu())
        self._build_layout()
        self._connect()

    def _build_layout(self) -> None:
        title = QLabel("Conversations", self, objectName="panelTitle")
        actions = QHBoxLayout()
        for button in (self.rename_button, self.delete_button, self.export_button):
            button.setAccessibleName(f"{button.text()} the selected conversation")
            actions.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addWidget(title)
        layout.addWidget(self.view, 1)
        layout.addLayout(actions)

    def _export_menu(self) -> QMenu:
        menu = QMenu(self)
        for fmt, (label, _, _) in EXPORT_FORMATS.items():
            action = QAction(f"As {label.split(' ')[0]}…", menu)
            action.triggered.connect(lambda _=False, fmt=fmt: self._on_export_action_triggered(fmt))
            menu.addAction(action)
        return menu

    def _connect(self) -> None:
        self.view.clicked.connect(self._on_view_clicked)
        self.model.renamed.connect(self.select)  # the reset that re-sorts the list drops the selection
        self.view.customContextMenuRequested.connect(self._on_view_custom_context_menu_requested)
        self.rename_button.clicked.connect(self._on_rename_button_clicked)
        self.delete_button.clicked.connect(self._on_delete_button_clicked)

    def refresh(self, selected_id: int | None = None) -> None:
        self.model.refresh()
        self.select(selected_id)

    def select(self, conversation_id: int | None) -> None:
        row = self.model.row_of(conversation_id) if conversation_id is not None else -1
        if row >= 0:
            self.view.setCurrentIndex(self.model.index(row))
        else:
            self.view.clearSelection()

    def selected_id(self) -> int | None:
        index = self.view.currentIndex()
        return index.data(ID_ROLE) if index.isValid() else None

    def delete_conversation(self, conversation_id: int) -> None:
        self.model.delete(conversation_id)
        self.conversation_deleted.emit(conversation_id)

    def export_conversation(self, conversation_id: int, path: Path, fmt: str) -> None:
        conversation = self._store.get(conversation_id)
        write_text_atomic(path, EXPORT_FORMATS[fmt][2](conversation, self._store.messages(conversation_id),
                                                       self._store.images.get))

    @Slot(QModelIndex)
    def _on_view_clicked(self, index: QModelIndex) -> None:
        self.conversation_activated.emit(index.data(ID_ROLE))

    @Slot()
    def _on_rename_button_clicked(self) -> None:
        if self.view.currentIndex().isValid():
            self.view.edit(self.view.currentIndex())

    @Slot()
    def _on_delete_button_clicked(self) -> None:
        conversation_id = self.selected_id()
        if conversation_id is None:
            return
        box = QMessageBox(QMessageBox.Icon.Question, "Delete conversation",
                          f"Delete “{self._store.get(conversation_id).title}”? This cannot be undone.",
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self)
        yes = box.button(QMessageBox.StandardButton.Yes)
        box.finished.connect(lambda _: box.clickedButton() is yes and self.delete_conversation(conversation_id))
        box.open()

    def _on_export_action_triggered(self, fmt: str) -> None:
        conversation_id = self.selected_id()
        if conversation_id is None:
            return
        label, suffix, _ = EXPORT_FORMATS[fmt]
        title = self._store.get(conversation_id).title
        default = str(Path.home() / (safe_file_name(title) + suffix))
        path, _ = QFileDialog.getSaveFileName(self, "Export conversation", default, label)
        if path:
            self.export_conversation(conversation_id, Path(path), fmt)

    @Slot("QPoint")
    def _on_view_custom_context_menu_requested(self, position) -> None:
        index = self.view.indexAt(position)
        if not index.isValid():
            return
        self.view.setCurrentIndex(index)
        menu = QMenu(self)
        menu.addAction("Rename", self._on_rename_button_clicked)
        menu.addAction("Delete", self._on_delete_button_clicked)
        menu.addMenu(self.export_button.menu()).setText("Export")
        menu.exec(self.view.viewport().mapToGlobal(position))


def safe_file_name(title: str) -> str:
    return "".join(ch if ch.isalnum() or ch in " -_" else "_" for ch in title).strip() or "conversation"
