"""The controller's decisions: every PlanEvent (applied or refused), newest first."""

from __future__ import annotations

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QListWidget, QListWidgetItem, QWidget

from app.memory.plan_text import describe_plan_event

MAX_ENTRIES = 200


class PlanLogWidget(QListWidget):
    def __init__(self, format_bytes, parent: QWidget | None = None):
        super().__init__(parent)
        self._format_bytes = format_bytes
        self._error_color = QColor("#cf222e")
        self.setAccessibleName("Controller decisions")
        self.setWordWrap(True)
        self.setFixedHeight(110)

    def set_error_color(self, color: QColor) -> None:
        self._error_color = color

    def add_text(self, text: str, is_error: bool = False) -> None:
        item = QListWidgetItem(text)
        item.setToolTip(text)
        if is_error:
            item.setForeground(self._error_color)
        self.insertItem(0, item)
        while self.count() > MAX_ENTRIES:
            self.takeItem(self.count() - 1)

    def add_event(self, event) -> None:
        self.add_text(describe_plan_event(event, self._format_bytes), is_error=bool(event.error))

    def entries(self) -> list[str]:
        return [self.item(row).text() for row in range(self.count())]
