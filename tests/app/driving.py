"""What a user does in the app, as test helpers (pytest-qt waits, no sleeps)."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

REPLY_TIMEOUT_MS = 30_000


def use_greedy_sampling(window, max_tokens: int, system_prompt: str | None = None) -> None:
    bar = window.chat.settings_bar
    bar.set_sampling(0.0, 1.0, max_tokens)
    if system_prompt is not None:
        bar.set_system_prompt(system_prompt)


def type_and_send(qtbot, window, text: str) -> None:
    """Type into the message box and press Ctrl+Enter, as a user would."""
    editor = window.chat.composer.editor
    editor.setFocus()
    editor.setPlainText(text)
    qtbot.keyClick(editor, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def wait_until_idle(qtbot, window, timeout: int = REPLY_TIMEOUT_MS) -> None:
    qtbot.waitUntil(lambda: not window.generation.is_busy, timeout=timeout)


def messages(window):
    return window.conversation.messages


def error_dialogs(window) -> list[QMessageBox]:
    return [box for box in window.findChildren(QMessageBox, "errorDialog") if box.isVisible()]


def wait_for_error_dialog(qtbot, window, timeout: int = 10_000) -> QMessageBox:
    qtbot.waitUntil(lambda: bool(error_dialogs(window)), timeout=timeout)
    return error_dialogs(window)[0]
