"""A row of image thumbnails: above the message box (each with a button that removes it) and in a sent message
(a click opens the image larger)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QIcon, QPixmap
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QVBoxLayout, QWidget

THUMBNAIL_PX = 64


def thumbnail(data: bytes, size: int = THUMBNAIL_PX) -> QPixmap:
    pixmap = QPixmap()
    pixmap.loadFromData(data)
    return pixmap.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


class ImageStripWidget(QWidget):
    opened = Signal("qint64")  # the index of the thumbnail clicked
    removed = Signal("qint64")  # the index whose remove button was clicked

    def __init__(self, is_removable: bool, parent: QWidget | None = None):
        super().__init__(parent)
        self._is_removable = is_removable
        self.thumbnails: list[QToolButton] = []
        self.remove_buttons: list[QToolButton] = []
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(0, 0, 0, 0)
        self._row.addStretch(1)
        self.hide()

    def set_images(self, images: list[bytes]) -> None:
        while self._row.count() > 1:
            self._row.takeAt(0).widget().deleteLater()
        self.thumbnails, self.remove_buttons = [], []
        for index, data in enumerate(images):
            self._row.insertWidget(index, self._cell(index, data))
        self.setVisible(bool(images))

    def _cell(self, index: int, data: bytes) -> QWidget:
        cell = QWidget(self)
        column = QVBoxLayout(cell)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        button = QToolButton(cell, objectName="imageThumbnail", toolTip="Open the image larger")
        button.setIcon(QIcon(thumbnail(data)))
        button.setIconSize(QSize(THUMBNAIL_PX, THUMBNAIL_PX))
        button.setAccessibleName(f"Image {index + 1}")
        button.clicked.connect(lambda: self.opened.emit(index))
        column.addWidget(button)
        self.thumbnails.append(button)
        if self._is_removable:
            remove = QToolButton(cell, text="Remove", objectName="messageAction", toolTip="Do not send this image")
            remove.setAccessibleName(f"Remove image {index + 1}")
            remove.clicked.connect(lambda: self.removed.emit(index))
            column.addWidget(remove)
            self.remove_buttons.append(remove)
        return cell
