"""Marks under the budget slider for the loaded model: a tick (▲) at its minimum and at its all-resident size on
the slider's scale, and a line naming both as links that set that budget."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QLabel, QSlider, QStyle, QVBoxLayout, QWidget

TICK = "▲"


class BudgetMarksWidget(QWidget):
    mark_clicked = Signal(object)  # the mark's budget in bytes

    def __init__(self, slider: QSlider, parent: QWidget | None = None):
        super().__init__(parent)
        self._slider = slider
        self._marks: list[tuple[int, int, str]] = []  # (slider position, bytes, text)
        self._ticks: list[QLabel] = []
        self.tick_row = QWidget(self)
        self.tick_row.setFixedHeight(12)
        self.links = QLabel(self, objectName="mutedLabel", wordWrap=True)
        self.links.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse |
                                           Qt.TextInteractionFlag.LinksAccessibleByKeyboard)
        self.links.setAccessibleName("Budget marks of the loaded model")
        self.links.linkActivated.connect(self._on_links_link_activated)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.tick_row)
        layout.addWidget(self.links)
        self.hide()

    def set_marks(self, marks: list[tuple[int, int, str]]) -> None:
        """marks: (slider position, bytes, text) each; an empty list hides the marks."""
        for tick in self._ticks:
            tick.deleteLater()
        self._marks = list(marks)
        self._ticks = []
        for _, _, text in self._marks:
            tick = QLabel(TICK, self.tick_row, objectName="budgetTick")
            tick.setToolTip(text)
            tick.adjustSize()
            tick.show()
            self._ticks.append(tick)
        self.links.setText(" · ".join(f'{TICK} <a href="{i}">{text}</a>' for i, (_, _, text) in enumerate(marks)))
        self.setVisible(bool(marks))
        self._place()

    @property
    def texts(self) -> list[str]:
        return [text for _, _, text in self._marks]

    def click(self, index: int) -> None:
        """Set the budget to the index-th mark (keyboard users and tests)."""
        self._on_links_link_activated(str(index))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._place()

    def _place(self) -> None:
        """Each tick under its slider position (the slider's handle centre at that value)."""
        handle = self._slider.style().pixelMetric(QStyle.PixelMetric.PM_SliderLength, None, self._slider)
        offset = self._slider.mapTo(self.window(), self._slider.rect().topLeft()).x() - \
            self.tick_row.mapTo(self.window(), self.tick_row.rect().topLeft()).x()
        span = max(1, self._slider.width() - handle)
        for (position, _, _), tick in zip(self._marks, self._ticks):
            x = offset + handle // 2 + QStyle.sliderPositionFromValue(self._slider.minimum(), self._slider.maximum(),
                                                                      position, span)
            tick.move(max(0, min(x - tick.width() // 2, self.tick_row.width() - tick.width())), 0)

    @Slot(str)
    def _on_links_link_activated(self, link: str) -> None:
        self.mark_clicked.emit(self._marks[int(link)][1])
