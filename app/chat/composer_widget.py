"""Where the user writes: the message box with Send, Stop and, in code mode, "Continue as code".
Ctrl+Enter sends from the box itself (the window's Send action has the same shortcut for the menus)."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.icons import icon


class _MessageEditWidget(QPlainTextEdit):
    submitted = Signal()

    def keyPressEvent(self, event) -> None:
        is_enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if is_enter and event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            self.submitted.emit()
            return
        super().keyPressEvent(event)


class ComposerWidget(QWidget):
    send_requested = Signal(str)
    continue_requested = Signal(str)
    fill_requested = Signal(str, str)  # code before the cursor, code after it (fill-in-the-middle)
    stop_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.editor = _MessageEditWidget(self)
        self.editor.setAccessibleName("Message")
        self.editor.setPlaceholderText("Write a message…  (Ctrl+Enter sends)")
        self.editor.setFixedHeight(84)
        self.send_button = QPushButton(icon("send"), "Send", self, objectName="primaryButton")
        self.send_button.setToolTip("Send (Ctrl+Enter)")
        self.send_button.setAccessibleName("Send message")
        self.stop_button = QPushButton(icon("stop"), "Stop", self, objectName="stopButton")
        self.stop_button.setToolTip("Stop generating (Esc)")
        self.stop_button.setAccessibleName("Stop generating")
        self.continue_button = QPushButton(icon("code"), "Continue as code", self)
        self.continue_button.setToolTip("Send the text as raw code for the model to continue (no chat template)")
        self.continue_button.setAccessibleName("Continue as code")
        self._is_ready, self._is_busy, self._has_fill_in_middle = False, False, False
        self._build_layout()
        self.editor.submitted.connect(self._on_editor_submitted)
        self.send_button.clicked.connect(self._on_editor_submitted)
        self.continue_button.clicked.connect(self._on_continue_button_clicked)
        self.stop_button.clicked.connect(self.stop_requested)
        self.set_code_mode(False)
        self._update_buttons()

    def _build_layout(self) -> None:
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.continue_button)
        buttons.addStretch(1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.editor, 1)
        layout.addLayout(buttons)

    def set_ready(self, is_ready: bool) -> None:
        """A model is loaded and can take requests."""
        self._is_ready = is_ready
        self._update_buttons()

    def set_busy(self, is_busy: bool) -> None:
        self._is_busy = is_busy
        self._update_buttons()

    def set_fill_in_middle(self, has_fill_in_middle: bool) -> None:
        """The model has fill-in-the-middle tokens: the code button completes at the cursor, with the text after
        the cursor as what must follow."""
        self._has_fill_in_middle = has_fill_in_middle
        self.continue_button.setText("Complete at cursor" if has_fill_in_middle else "Continue as code")
        self.continue_button.setAccessibleName(self.continue_button.text())
        self.continue_button.setToolTip(
            "Write the code that goes at the cursor, between the text before and after it (fill-in-the-middle)"
            if has_fill_in_middle else "Send the text as raw code for the model to continue (no chat template)")

    def set_code_mode(self, is_code_mode: bool) -> None:
        self.continue_button.setVisible(is_code_mode)
        self.editor.setPlaceholderText("Ask about code, or paste code and press “Continue as code”…"
                                       if is_code_mode else "Write a message…  (Ctrl+Enter sends)")

    def text(self) -> str:
        return self.editor.toPlainText()

    def clear(self) -> None:
        self.editor.clear()

    def submit(self) -> None:
        self._on_editor_submitted()

    def _update_buttons(self) -> None:
        can_send = self._is_ready and not self._is_busy
        self.send_button.setEnabled(can_send)
        self.continue_button.setEnabled(can_send)
        self.stop_button.setEnabled(self._is_busy)

    @Slot()
    def _on_editor_submitted(self) -> None:
        if self.send_button.isEnabled() and self.text().strip():
            self.send_requested.emit(self.text())

    @Slot()
    def _on_continue_button_clicked(self) -> None:
        if not self.continue_button.isEnabled() or not self.text().strip():
            return
        cursor = self.editor.textCursor().position()
        prefix, suffix = self.text()[:cursor], self.text()[cursor:]
        if self._has_fill_in_middle and suffix.strip():
            self.fill_requested.emit(prefix, suffix)
        else:
            self.continue_requested.emit(self.text())
