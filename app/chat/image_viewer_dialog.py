"""An image of the chat shown larger (at most the screen's size, scaled down to fit), with Close."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QPixmap
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

SCREEN_SHARE = 0.8


class ImageViewerDialog(QDialog):
    def __init__(self, data: bytes, title: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        pixmap = QPixmap()
        pixmap.loadFromData(data)
        screen = QGuiApplication.primaryScreen().availableSize() * SCREEN_SHARE
        if pixmap.width() > screen.width() or pixmap.height() > screen.height():
            pixmap = pixmap.scaled(screen, Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
        self.image_label = QLabel(self, alignment=Qt.AlignmentFlag.AlignCenter)
        self.image_label.setPixmap(pixmap)
        self.image_label.setAccessibleName(title)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.image_label, 1)
        layout.addWidget(buttons)
