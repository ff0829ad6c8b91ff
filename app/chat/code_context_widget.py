"""Code mode's context: files or a folder attached to the next message, with their token count."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QListWidget, QPushButton, QVBoxLayout, QWidget

from app.background import run_in_background
from app.chat.attachments import Attachment, context_block, read_attachments
from app.chat.token_counter import TokenCounter
from app.icons import icon


class CodeContextWidget(QWidget):
    attachments_changed = Signal("qint64")  # token count of the attached context

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._attachments: list[Attachment] = []
        self._counter = TokenCounter(None)
        self._token_count = 0
        self._count_generation = 0
        self.file_list = QListWidget(self)
        self.file_list.setAccessibleName("Attached files")
        self.file_list.setFixedHeight(64)
        self.file_list.hide()  # shown once something is attached
        self.attach_files_button = QPushButton(icon("attach"), "Attach files…", self)
        self.attach_folder_button = QPushButton("Attach folder…", self)
        self.clear_button = QPushButton("Clear", self)
        self.summary_label = QLabel("No files attached", self, objectName="mutedLabel")
        self.summary_label.setAccessibleName("Attached context size")
        self._build_layout()
        self.attach_files_button.clicked.connect(self._on_attach_files_button_clicked)
        self.attach_folder_button.clicked.connect(self._on_attach_folder_button_clicked)
        self.clear_button.clicked.connect(self.clear)

    def _build_layout(self) -> None:
        buttons = QHBoxLayout()
        buttons.addWidget(QLabel("Context for the next message:", self, objectName="mutedLabel"))
        buttons.addWidget(self.summary_label, 1)
        for button in (self.attach_files_button, self.attach_folder_button, self.clear_button):
            buttons.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(buttons)
        layout.addWidget(self.file_list)

    @property
    def token_count(self) -> int:
        return self._token_count

    def set_token_counter(self, counter: TokenCounter) -> None:
        self._counter = counter
        self._update_summary()

    def attach(self, paths: list[Path]) -> None:
        """Read the files (folders expanded) off the GUI thread, then list them and count their tokens."""
        run_in_background(lambda report: read_attachments(paths), on_success=self._on_read_task_succeeded)

    def attached_paths(self) -> tuple[str, ...]:
        return tuple(str(attachment.path) for attachment in self._attachments)

    def context_text(self) -> str:
        return context_block(self._attachments)

    @Slot()
    def clear(self) -> None:
        self._attachments = []
        self.file_list.clear()
        self.file_list.hide()
        self._update_summary()

    def _on_read_task_succeeded(self, attachments: list[Attachment]) -> None:
        known = {a.path for a in self._attachments}
        for attachment in attachments:
            if attachment.path not in known:
                self._attachments.append(attachment)
                self.file_list.addItem(str(attachment.path))
        self.file_list.setVisible(bool(self._attachments))
        self._update_summary()

    def _update_summary(self) -> None:
        """Count tokens off the GUI thread (a folder can be megabytes); only the latest count is shown."""
        self._count_generation += 1
        generation, counter, text = self._count_generation, self._counter, self.context_text()
        if not self._attachments:
            self._on_count_task_succeeded(generation, 0)
            return
        self.summary_label.setText(f"{len(self._attachments)} file(s) · counting tokens…")
        run_in_background(lambda report: counter.count(text),
                          on_success=lambda count: self._on_count_task_succeeded(generation, count))

    def _on_count_task_succeeded(self, generation: int, count: int) -> None:
        if generation != self._count_generation:
            return
        self._token_count = count
        approximate = "" if self._counter.is_exact else "≈ "
        self.summary_label.setText(f"{len(self._attachments)} file(s) · {approximate}{count:,} tokens"
                                   if self._attachments else "No files attached")
        self.attachments_changed.emit(count)

    @Slot()
    def _on_attach_files_button_clicked(self) -> None:
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach files", str(Path.home()))
        if paths:
            self.attach([Path(path) for path in paths])

    @Slot()
    def _on_attach_folder_button_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Attach a folder", str(Path.home()))
        if folder:
            self.attach([Path(folder)])
