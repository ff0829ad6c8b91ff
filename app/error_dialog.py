"""Tell the user about an error they can act on, without blocking the app: a window-modal message box that
is opened (not exec'd), so the event loop, the engine and any streaming reply keep running."""

from __future__ import annotations

import logging

from PySide6.QtWidgets import QMessageBox, QWidget

log = logging.getLogger(__name__)
OBJECT_NAME = "errorDialog"


def show_error(parent: QWidget, title: str, message: str) -> QMessageBox:
    log.warning("%s: %s", title, message)
    box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, parent)
    box.setObjectName(OBJECT_NAME)
    box.setAccessibleName(title)
    box.finished.connect(box.deleteLater)
    box.open()
    return box
