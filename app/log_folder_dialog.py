"""Where the logs are, for a desktop with no file manager to open them in (Help → Open logs falls back to it):
the folder's path, selectable, with a Copy button."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QVBoxLayout,
                               QWidget)


class LogFolderDialog(QDialog):
    def __init__(self, folder: Path, newest_log: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("logFolderDialog")
        self.setWindowTitle("Logs")
        self.path_edit = QLineEdit(str(folder), self, readOnly=True)
        self.path_edit.setAccessibleName("Log folder")
        self.path_edit.setMinimumWidth(420)
        self.copy_button = QPushButton("Copy", self)
        self.copy_button.setAccessibleName("Copy the log folder's path")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        row = QHBoxLayout()
        row.addWidget(self.path_edit, 1)
        row.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"No file manager could open the log folder. It is here ({newest_log} is the "
                                f"newest log):", self, wordWrap=True))
        layout.addLayout(row)
        layout.addWidget(buttons)
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        buttons.rejected.connect(self.reject)
        self.finished.connect(self.deleteLater)

    @Slot()
    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.path_edit.text())
        self.copy_button.setText("Copied")
