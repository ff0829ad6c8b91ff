"""A horizontal bar of the device budget split into segments (dense | experts | KV | workspace | free)."""

from __future__ import annotations

from PySide6.QtCore import QRectF, QSize
from PySide6.QtGui import QColor, QPainter, QPainterPath
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.memory.memory_segments import Segment


class MemoryBarWidget(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._segments: list[Segment] = []
        self._colors: dict[str, QColor] = {}
        self._border = QColor("#888888")
        self.setAccessibleName("Device memory split")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setMinimumHeight(22)

    def sizeHint(self) -> QSize:
        return QSize(300, 22)

    def set_colors(self, colors: dict[str, QColor], border: QColor) -> None:
        self._colors, self._border = colors, border
        self.update()

    def set_segments(self, segments: list[Segment], describe: str) -> None:
        self._segments = segments
        self.setToolTip(describe)
        self.setAccessibleDescription(describe)
        self.update()

    @property
    def segments(self) -> list[Segment]:
        return list(self._segments)

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        outline = QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5)
        clip = QPainterPath()
        clip.addRoundedRect(outline, 5, 5)
        painter.setClipPath(clip)
        total = sum(segment.num_bytes for segment in self._segments)
        x = outline.left()
        for segment in self._segments:
            if total <= 0 or segment.num_bytes <= 0:
                continue
            width = max(outline.width() * segment.num_bytes / total, 2.0)
            painter.fillRect(QRectF(x, outline.top(), width, outline.height()),
                             self._colors.get(segment.key, QColor("#999999")))
            x += width
        painter.setClipping(False)
        painter.setPen(self._border)
        painter.drawRoundedRect(outline, 5, 5)
