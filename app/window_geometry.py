"""The main window's size, position and maximized state, kept in the settings: restored at start, saved once a
drag or resize pauses (not at every pixel) and at close."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QByteArray, QEvent, QObject, QTimer
from PySide6.QtWidgets import QWidget

SAVE_AFTER_MS = 500


def restore_geometry(window: QWidget, saved: str | None) -> None:
    """`saved`: QWidget.saveGeometry() as base64 (AppSettings.window_geometry), or None for the first run."""
    if saved:
        window.restoreGeometry(QByteArray.fromBase64(saved.encode("ascii")))


def geometry_text(window: QWidget) -> str:
    return bytes(window.saveGeometry().toBase64()).decode("ascii")


class GeometrySaver(QObject):
    """Watches a window's moves and resizes and calls `save(geometry_text)` after each pause."""

    def __init__(self, window: QWidget, save: Callable[[str], None]):
        super().__init__(window)
        self._window, self._save = window, save
        self._timer = QTimer(self, singleShot=True, interval=SAVE_AFTER_MS)
        self._timer.timeout.connect(self.save_now)
        window.installEventFilter(self)

    def save_now(self) -> None:
        self._timer.stop()
        self._save(geometry_text(self._window))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Move, QEvent.Type.Resize) and self._window.isVisible():
            self._timer.start()
        return False
