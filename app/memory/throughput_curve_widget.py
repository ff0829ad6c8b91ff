"""MV-WSA's predicted decode tok/s against the experts' share of the memory pool, with the current split
marked; until a curve is plugged in (app.memory.wsa_curve) it says that none is available."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.memory.wsa_curve import UNAVAILABLE_TEXT, CurvePoints, value_at

MARGIN_LEFT, MARGIN_BOTTOM = 34, 30


class ThroughputCurveWidget(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._points: list[tuple[float, float]] | None = None
        self._current: float | None = None
        self._line, self._text, self._muted, self._marker = (QColor("#3b6fd8"), QColor("#000"), QColor("#777"),
                                                             QColor("#cf222e"))
        self.setAccessibleName("Predicted tokens per second against expert share")
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(150)
        self.set_curve(None, None)

    def sizeHint(self) -> QSize:
        return QSize(300, 150)

    def set_colors(self, line: QColor, text: QColor, muted: QColor, marker: QColor) -> None:
        self._line, self._text, self._muted, self._marker = line, text, muted, marker
        self.update()

    def set_curve(self, points: CurvePoints | None, current_share: float | None) -> None:
        self._points = sorted(points) if points else None
        self._current = current_share
        self.setAccessibleDescription(UNAVAILABLE_TEXT if self._points is None else self.caption or
                                      f"{len(self._points)} points; current expert share {current_share:.0%}")
        self.update()

    @property
    def caption(self) -> str:
        """Said over the chart when there is no curve to draw: a budget with room for one split only."""
        if self._points is None or len(self._points) > 1:
            return ""
        share, tok_s = self._points[0]
        return (f"Only one split fits this budget ({share:.1%} experts, {tok_s:.1f} tok/s predicted); "
                f"a larger budget gives the controller a choice.")

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
        chart = QRectF(MARGIN_LEFT, 14, self.width() - MARGIN_LEFT - 10, self.height() - MARGIN_BOTTOM - 16)
        left, right, top = axis_ranges(self._points, self._current)
        to_screen = lambda x, y: QPointF(chart.left() + chart.width() * (x - left) / (right - left),
                                         chart.bottom() - chart.height() * y / top)
        self._paint_axes(painter, chart, left, right, top)
        painter.setPen(QPen(self._line, 1.8))
        painter.drawPolyline([to_screen(x, y) for x, y in self._points])
        if self.caption:
            painter.setPen(self._muted)
            painter.drawText(chart.adjusted(6, 4, -6, -4),  # below: the one split's dot is near the top
                             Qt.AlignmentFlag.AlignBottom | Qt.TextFlag.TextWordWrap, self.caption)
        if self._current is not None:
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(self._marker)
            painter.drawEllipse(to_screen(self._current, value_at(self._points, self._current)), 4, 4)

    def _paint_axes(self, painter: QPainter, chart: QRectF, left: float, right: float, top: float) -> None:
        """Both axes with three labelled ticks each: tok/s from 0, expert share over the feasible range."""
        painter.setPen(QPen(self._muted, 0.8))
        painter.drawLine(chart.bottomLeft(), chart.bottomRight())
        painter.drawLine(chart.bottomLeft(), chart.topLeft())
        painter.drawText(QRectF(chart.left() + 6, 0, 80, 12), Qt.AlignmentFlag.AlignLeft, "tok/s")
        for i in range(3):
            y = chart.bottom() - chart.height() * i / 2
            painter.drawLine(QPointF(chart.left() - 3, y), QPointF(chart.left(), y))
            painter.drawText(QRectF(0, y - 7, MARGIN_LEFT - 5, 14),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"{top * i / 2:.0f}")
            x = chart.left() + chart.width() * i / 2
            painter.drawLine(QPointF(x, chart.bottom()), QPointF(x, chart.bottom() + 3))
            align = (Qt.AlignmentFlag.AlignLeft, Qt.AlignmentFlag.AlignHCenter, Qt.AlignmentFlag.AlignRight)[i]
            painter.drawText(QRectF(x - (0, 30, 60)[i], chart.bottom() + 3, 60, 14), align,
                             share_labels(left, right)[i])
        painter.drawText(QRectF(chart.left(), chart.bottom() + 17, chart.width(), 14), Qt.AlignmentFlag.AlignCenter,
                         "expert share of the pool")


def share_labels(left: float, right: float) -> list[str]:
    """The x axis' three ticks as percentages with as many decimals as keep them apart (a pool whose expert share
    spans 0.3% to 1.2% reads 0.3% 0.8% 1.2%, not 0% 1% 1%)."""
    ticks = [left + (right - left) * i / 2 for i in range(3)]
    for decimals in range(4):
        labels = [f"{tick:.{decimals}%}" for tick in ticks]
        if len(set(labels)) == 3:
            return labels
    return labels


def axis_ranges(points, current: float | None) -> tuple[float, float, float]:
    """The x range the curve (and the current split) covers, and a y top a little above the curve's best."""
    xs = [x for x, _ in points] + ([current] if current is not None else [])
    left, right = min(xs), max(xs)
    if right - left < 1e-6:  # a single feasible split: show it in a 10% window
        left = max(0.0, left - 0.05)
        right = left + 0.1
    return left, right, max(max(y for _, y in points), 1e-9) * 1.1
