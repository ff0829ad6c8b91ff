"""MV-WSA's predicted decode tok/s against the experts' share of the memory pool, with the current split
marked; until a curve is plugged in (app.memory.wsa_curve) it says that none is available."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.memory.wsa_curve import UNAVAILABLE_TEXT, CurvePoints, value_at

MARGIN_LEFT, MARGIN_BOTTOM = 34, 18


class ThroughputCurveWidget(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._points: list[tuple[float, float]] | None = None
        self._current: float | None = None
        self._line, self._text, self._muted, self._marker = (QColor("#3b6fd8"), QColor("#000"), QColor("#777"),
                                                             QColor("#cf222e"))
        self.setAccessibleName("Predicted tokens per second against expert share")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(120)
        self.set_curve(None, None)

    def sizeHint(self) -> QSize:
        return QSize(300, 120)

    def set_colors(self, line: QColor, text: QColor, muted: QColor, marker: QColor) -> None:
        self._line, self._text, self._muted, self._marker = line, text, muted, marker
        self.update()

    def set_curve(self, points: CurvePoints | None, current_share: float | None) -> None:
        self._points = sorted(points) if points else None
        self._current = current_share
        self.setAccessibleDescription(UNAVAILABLE_TEXT if self._points is None else
                                      f"{len(self._points)} points; current expert share {current_share:.0%}")
        self.update()

    @property
    def is_available(self) -> bool:
        return self._points is not None

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        if self._points is None:
            painter.setPen(self._muted)
            painter.drawRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5))
            painter.drawText(QRectF(self.rect()).adjusted(8, 4, -8, -4),
                             Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap, UNAVAILABLE_TEXT)
            return
        chart = QRectF(MARGIN_LEFT, 4, self.width() - MARGIN_LEFT - 4, self.height() - MARGIN_BOTTOM - 4)
        top = max(y for _, y in self._points) or 1.0
        to_screen = lambda x, y: QPointF(chart.left() + chart.width() * x, chart.bottom() - chart.height() * y / top)
        self._paint_axes(painter, chart, top)
        painter.setPen(QPen(self._line, 1.8))
        painter.drawPolyline([to_screen(x, y) for x, y in self._points])
        if self._current is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(self._marker)
            painter.drawEllipse(to_screen(self._current, value_at(self._points, self._current)), 4, 4)

    def _paint_axes(self, painter: QPainter, chart: QRectF, top: float) -> None:
        painter.setPen(QPen(self._muted, 0.8))
        painter.drawLine(chart.bottomLeft(), chart.bottomRight())
        painter.drawLine(chart.bottomLeft(), chart.topLeft())
        painter.drawText(QRectF(0, chart.top() - 2, MARGIN_LEFT - 4, 14), Qt.AlignmentFlag.AlignRight, f"{top:.0f}")
        painter.drawText(QRectF(chart.left(), chart.bottom() + 2, chart.width(), 14), Qt.AlignmentFlag.AlignCenter,
                         "expert share of the pool → (tok/s ↑)")
