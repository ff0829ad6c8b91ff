"""A reasoning model's reasoning above its answer, in a section the user opens and closes (closed at first, so
the answer stays in view). GUI thread only."""

from __future__ import annotations

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import QLabel, QToolButton, QVBoxLayout, QWidget


def toggle_text(reasoning: str, is_streaming: bool) -> str:
    if is_streaming:
        return "Thinking…"
    num_words = len(reasoning.split())
    return f"Reasoning ({num_words} word{'' if num_words == 1 else 's'})"


class ReasoningWidget(QWidget):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.toggle_button = QToolButton(self, objectName="reasoningToggle", checkable=True,
                                         toolButtonStyle=Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle_button.setArrowType(Qt.ArrowType.RightArrow)
        self.toggle_button.setAccessibleName("Show the reasoning")
        self.text_label = QLabel(self, objectName="reasoningText", wordWrap=True,
                                 textFormat=Qt.TextFormat.PlainText)
        self.text_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.text_label.setAccessibleName("Reasoning")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        layout.addWidget(self.toggle_button, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.text_label)
        self.toggle_button.toggled.connect(self._on_toggle_button_toggled)
        self._on_toggle_button_toggled(False)
        self.setVisible(False)

    @property
    def is_expanded(self) -> bool:
        return self.toggle_button.isChecked()

    def set_expanded(self, is_expanded: bool) -> None:
        self.toggle_button.setChecked(is_expanded)

    def set_reasoning(self, reasoning: str, is_streaming: bool) -> None:
        """Show `reasoning` (hidden entirely when there is none); whether it is open stays as the user left it."""
        self.text_label.setText(reasoning)
        self.toggle_button.setText(toggle_text(reasoning, is_streaming))
        self.setVisible(bool(reasoning))

    @Slot(bool)
    def _on_toggle_button_toggled(self, is_expanded: bool) -> None:
        self.text_label.setVisible(is_expanded)
        self.toggle_button.setArrowType(Qt.ArrowType.DownArrow if is_expanded else Qt.ArrowType.RightArrow)
        self.toggle_button.setAccessibleName("Hide the reasoning" if is_expanded else "Show the reasoning")
