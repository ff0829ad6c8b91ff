"""Tell the user about an error they can act on, without blocking the app: a window-modal message box that
is opened (not exec'd), so the event loop, the engine and any streaming reply keep running. Its text can be
selected, and a message that ends in an install command on a line of its own (the engine's error for a GGUF file
that needs llama-cpp-python) gets a button that copies that command."""

from __future__ import annotations

import logging

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMessageBox, QWidget

log = logging.getLogger(__name__)
OBJECT_NAME = "errorDialog"
COPY_BUTTON = "copyCommandButton"


def install_command(message: str) -> str | None:
    """The last line of `message` when it is a pip command (`pip install ...` or `PYTHON -m pip install ...`)."""
    line = message.strip().splitlines()[-1].strip() if message.strip() else ""
    return line if line.startswith("pip install ") or " -m pip install " in line else None


def show_error(parent: QWidget, title: str, message: str) -> QMessageBox:
    log.warning("%s: %s", title, message)
    box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, parent)
    box.setObjectName(OBJECT_NAME)
    box.setAccessibleName(title)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    command = install_command(message)
    if command:
        copy = box.addButton("Copy command", QMessageBox.ButtonRole.ActionRole)
        copy.setObjectName(COPY_BUTTON)
        copy.setToolTip(f"Copies {command} to the clipboard, to paste into a terminal")
        copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(command))
    box.finished.connect(box.deleteLater)
    box.open()
    return box
