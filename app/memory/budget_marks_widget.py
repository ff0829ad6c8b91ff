"""Marks under the budget slider: the loaded model's minimum and all-resident sizes, each a small button at its
place on the scale that asks for that budget."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QSlider, QStyle, QToolButton, QWidget


class BudgetMarksWidget(QWidget):
    mark_clicked = Signal(object)  # the mark's budget in bytes

    def __init__(self, slider: QSlider, parent: QWidget | None = None):
        super().__init__(parent)
        self._slider = slider
        self._marks: list[tuple[int, QToolButton]] = []  # (slider position, button)
        self.setFixedHeight(24)
        self.hide()

    def set_marks(self, marks: list[tuple[int, int, str]]) -> None:
        """marks: (slider position, bytes, text) each; an empty list hides the row."""
        for _, button in self._marks:
            button.deleteLater()
        self._marks = []
        for position, num_bytes, text in marks:
            button = QToolButton(self, text=f"▲ {text}", objectName="budgetMark", autoRaise=True)
            button.setAccessibleName(f"Set the budget to {text}")
            button.setToolTip(f"Set the budget to {text}")
            button.clicked.connect(lambda _=False, num_bytes=num_bytes: self.mark_clicked.emit(num_bytes))
            button.show()
            self._marks.append((position, button))
        self.setVisible(bool(marks))
        self._place()

    @property
    def texts(self) -> list[str]:
        return [button.text() for _, button in self._marks]

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place()

    def _place(self) -> None:
        """Put each mark's arrow under its slider position; marks that would overlap move right of the previous
        one, and a mark never leaves the row."""
        handle = self._slider.style().pixelMetric(QStyle.PixelMetric.PM_SliderLength, None, self._slider)
        offset = self._slider.mapTo(self.window(), self._slider.rect().topLeft()).x() - \
            self.mapTo(self.window(), self.rect().topLeft()).x()
        span = max(1, self._slider.width() - handle)
        right_of_previous = 0
        for position, button in sorted(self._marks, key=lambda mark: mark[0]):
            button.adjustSize()
            x = offset + handle // 2 + QStyle.sliderPositionFromValue(self._slider.minimum(), self._slider.maximum(),
                                                                      position, span) - 6
            x = max(right_of_previous, min(x, self.width() - button.width()))
            button.move(max(0, x), 0)
            right_of_previous = x + button.width() + 2
