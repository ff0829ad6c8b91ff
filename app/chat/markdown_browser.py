"""A read-only QTextBrowser that grows to fit its document (no scroll bars of its own; the chat scrolls)
and reports clicks on code-block actions."""

from __future__ import annotations

import math

from PySide6.QtCore import QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QFrame, QSizePolicy, QTextBrowser

from app.chat.markdown_render import CODE_SCHEME


class MarkdownBrowserView(QTextBrowser):
    code_action_requested = Signal(str, "qint64")  # action ("copy" | "save" | "continue"), code block index

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setVerticalScrollBarPolicy(self.verticalScrollBarPolicy().ScrollBarAlwaysOff)
        self.setHorizontalScrollBarPolicy(self.horizontalScrollBarPolicy().ScrollBarAlwaysOff)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.document().setDocumentMargin(2)
        self.document().documentLayout().documentSizeChanged.connect(self._on_layout_document_size_changed)
        self.anchorClicked.connect(self._on_self_anchor_clicked)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.document().setTextWidth(self.viewport().width())
        self._fit_height()

    @Slot()
    def _on_layout_document_size_changed(self, *_) -> None:
        self._fit_height()

    def _fit_height(self) -> None:
        height = math.ceil(self.document().size().height()) + 2 * self.frameWidth()
        if height != self.height():
            self.setFixedHeight(max(height, 16))

    @Slot(QUrl)
    def _on_self_anchor_clicked(self, url: QUrl) -> None:
        if url.scheme() == CODE_SCHEME:
            action, _, index = url.path().partition("/")
            self.code_action_requested.emit(action, int(index))
        elif url.scheme() in ("http", "https"):
            QDesktopServices.openUrl(url)
