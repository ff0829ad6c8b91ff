"""A small live chart: the last N samples of one number as a filled line, with its title and current value.
A sample may be None (nothing to measure then, e.g. no expert lookups while idle): the line has a gap there."""

from __future__ import annotations

from collections import deque
from typing import Callable

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPainterPath, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

NUM_SAMPLES = 120  # 30 s at the panel's 4 Hz


class SparklineWidget(QWidget):
    def __init__(self, title: str, format_value: Callable[[float], str], parent: QWidget | None = None,
                 fixed_maximum: float | None = None):
        super().__init__(parent)
        self._title, self._format = title, format_value
        self._values: deque[float | None] = deque(maxlen=NUM_SAMPLES)
        self._fixed_maximum = fixed_maximum
        self._line, self._fill, self._text, self._muted = (QColor("#3b6fd8"), QColor("#dbe6fa"), QColor("#000000"),
                                                           QColor("#777777"))
        self.setAccessibleName(title)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(54)

    def sizeHint(self) -> QSize:
        return QSize(300, 54)

    def set_colors(self, line: QColor, fill: QColor, text: QColor, muted: QColor) -> None:
        self._line, self._fill, self._text, self._muted = line, fill, text, muted
        self.update()

    def add_value(self, value: float | None) -> None:
        self._values.append(value)
        self.setAccessibleDescription(f"{self._title}: {self.value_text()}")
        self.update()

    def clear(self) -> None:
        """Forget the history (another model is serving)."""
        self._values.clear()
        self.setAccessibleDescription(f"{self._title}: –")
        self.update()

    @property
    def values(self) -> list[float | None]:
        return list(self._values)

    def value_text(self) -> str:
        return self._format(self._values[-1]) if self._values and self._values[-1] is not None else "–"

    def paintEvent(self, event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(self._muted)
        painter.drawText(QRectF(0, 0, self.width(), 16), Qt.AlignmentFlag.AlignLeft, self._title)
        painter.setPen(self._text)
        painter.drawText(QRectF(0, 0, self.width(), 16), Qt.AlignmentFlag.AlignRight, self.value_text())
        chart = QRectF(1, 19, self.width() - 2, self.height() - 21)
        painter.setPen(QPen(self._muted, 0.5))
        painter.drawLine(chart.bottomLeft(), chart.bottomRight())
        measured = [v for v in self._values if v is not None]
        if len(measured) < 2:
            return
        top = self._fixed_maximum or max(max(measured), 1e-9)
        step = chart.width() / (NUM_SAMPLES - 1)
        start = chart.right() - step * (len(self._values) - 1)
        run: list[QPointF] = []
        for i, value in enumerate([*self._values, None]):
            if value is not None:
                run.append(QPointF(start + i * step, chart.bottom() - chart.height() * min(value / top, 1.0)))
            elif run:
                self._paint_run(painter, chart, run)
                run = []

    def _paint_run(self, painter: QPainter, chart: QRectF, points: list[QPointF]) -> None:
        area = QPainterPath(QPointF(points[0].x(), chart.bottom()))
        for point in points:
            area.lineTo(point)
        area.lineTo(points[-1].x(), chart.bottom())
        painter.fillPath(area, self._fill)
        painter.setPen(QPen(self._line, 1.5))
        painter.drawPolyline(points)
