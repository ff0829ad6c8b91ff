"""One message of the chat: who said it, its stats (tok/s, time to first token, tokens), a reasoning model's
reasoning in a collapsible section, the thumbnails of its images, Markdown body with highlighted code blocks, and
its actions (copy, edit and resend, regenerate, code-block copy/save/continue)."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Callable

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QFileDialog, QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QToolButton,
                               QVBoxLayout, QWidget)

from app.chat.conversation_store import Message
from app.chat.image_strip_widget import ImageStripWidget
from app.chat.image_viewer_dialog import ImageViewerDialog
from app.chat.markdown_browser import MarkdownBrowserView
from app.chat.markdown_render import RenderStyle, code_blocks, fenced, render_markdown
from app.chat.reasoning_widget import ReasoningWidget
from app.chat.tool_call_text import calls_line, tool_markdown, tool_stats
from app.resource_paths import ICONS

MAX_CHIPS = 6  # more attached files are summed up as "+N more"
ROLE_NAMES = {("user", "chat"): "You", ("assistant", "chat"): "Wisp",
              ("user", "completion"): "Code to continue", ("assistant", "completion"): "Continuation",
              ("tool", "chat"): "Tool"}


def stats_text(message: Message) -> str:
    if message.role == "tool":
        return tool_stats(message)
    info = message.info
    if info.get("streaming"):
        return "generating…"
    parts = []
    if info.get("decode_tok_s"):
        parts.append(f"{info['decode_tok_s']:.1f} tok/s")
    if info.get("ttft_s") is not None and "reason" in info and info.get("reason") != "error":
        parts.append(f"first token {info['ttft_s'] * 1000:.0f} ms")
    if info.get("generated_tokens"):
        parts.append(f"{info['generated_tokens']} tokens")
    if info.get("reason") == "cancelled":
        parts.append("stopped")
    if info.get("reason") == "error":
        parts.append("error: " + info.get("error", "unknown"))
    return " · ".join(parts)


NOTHING_ADDED = "*The model added nothing here: it ended the code where it was.*"


def display_markdown(message: Message) -> str:
    if message.kind == "completion" and not message.content and message.role == "assistant":
        return "…" if message.info.get("streaming") else "" if message.info.get("reason") == "error" else NOTHING_ADDED
    if message.kind == "completion":
        return fenced(message.content)
    if message.role == "assistant" and not message.content and message.info.get("streaming"):
        return "…"
    if message.role == "tool":
        return tool_markdown(message)
    if message.role == "assistant" and message.info.get("tool_calls"):
        return "\n\n".join(part for part in (message.content, calls_line(message)) if part)
    return message.content


class MessageWidget(QFrame):
    regenerate_requested = Signal()
    resend_requested = Signal(str)
    continue_code_requested = Signal(str)

    def __init__(self, message: Message, style: RenderStyle, parent: QWidget | None = None,
                 image_source: Callable[[str], bytes | None] = lambda digest: None):
        """`image_source`: an image's bytes by the digest the message keeps (None: its file is gone)."""
        super().__init__(parent)
        self._message, self._style, self._is_code_mode = message, style, False
        self.setObjectName("userMessage" if message.role == "user" else "assistantMessage")
        self.role_label = QLabel(ROLE_NAMES.get((message.role, message.kind), message.role), objectName="roleLabel")
        self.stats_label = QLabel(objectName="statsLabel")
        self.copy_button = self._action_button("Copy", "Copy this message")
        self.edit_button = self._action_button("Edit", "Edit this message and send it again")
        self.regenerate_button = self._action_button("Regenerate", "Write this reply again")
        self.edit_button.setVisible(message.role == "user")
        self.regenerate_button.setVisible(message.role == "assistant")
        self.chips = self._attachment_chips(message.info.get("attachments") or [])
        self.images = [data for data in map(image_source, message.info.get("images") or []) if data is not None]
        self.image_strip = ImageStripWidget(is_removable=False, parent=self)
        self.image_strip.set_images(self.images)
        self.image_viewer: ImageViewerDialog | None = None
        self.reasoning = ReasoningWidget(self)
        self.body = MarkdownBrowserView(self)
        self.body.setAccessibleName(f"{self.role_label.text()} message")
        self.editor = QPlainTextEdit(self, accessibleName="Edit message")
        self.editor_buttons = self._editor_buttons()
        self._build_layout()
        self._connect()
        self.set_message(message)
        self._show_editor(False)

    @property
    def message(self) -> Message:
        return self._message

    def set_message(self, message: Message) -> None:
        self._message = message
        self.stats_label.setText(stats_text(message))
        self.reasoning.set_reasoning(message.info.get("reasoning", ""), bool(message.info.get("streaming")))
        self.body.setHtml(render_markdown(display_markdown(message), self._style, self._code_actions()))

    def set_render_style(self, style: RenderStyle) -> None:
        self._style = style
        self.set_message(self._message)

    def set_code_mode(self, is_code_mode: bool) -> None:
        if is_code_mode != self._is_code_mode:
            self._is_code_mode = is_code_mode
            self.set_message(self._message)

    def set_actions_enabled(self, is_enabled: bool) -> None:
        for button in (self.edit_button, self.regenerate_button):
            button.setEnabled(is_enabled)

    def _code_actions(self) -> tuple[str, ...]:
        if self._message.role == "tool":
            return ("copy",)
        return ("copy", "save", "continue") if self._is_code_mode else ("copy", "save")

    def _action_button(self, text: str, description: str) -> QToolButton:
        button = QToolButton(self, text=text, objectName="messageAction", toolTip=description)
        button.setAccessibleName(description)
        return button

    def _attachment_chips(self, paths: list[str]) -> QWidget:
        """One small label per attached file (its name; the full path on hover) above the question."""
        box = QWidget(self)
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        for path in paths[:MAX_CHIPS]:
            row.addWidget(self._attachment_chip(path, box))
        if len(paths) > MAX_CHIPS:
            row.addWidget(QLabel(f"+{len(paths) - MAX_CHIPS} more", box, objectName="statsLabel",
                                 toolTip="\n".join(paths[MAX_CHIPS:])))
        row.addStretch(1)
        box.setVisible(bool(paths))
        return box

    @staticmethod
    def _attachment_chip(path: str, parent: QWidget) -> QLabel:
        """The app's attach icon (an emoji may have no glyph in the user's fonts) and the file's name."""
        chip = QLabel(f'<img src="{ICONS / "attach.svg"}" width="12" height="12"> {html.escape(Path(path).name)}',
                      parent, objectName="attachmentChip", toolTip=path, textFormat=Qt.TextFormat.RichText)
        chip.setAccessibleName(f"Attached file {path}")
        return chip

    def _editor_buttons(self) -> QWidget:
        box = QWidget(self)
        row = QHBoxLayout(box)
        row.setContentsMargins(0, 0, 0, 0)
        self.resend_button = QPushButton("Send again", box, objectName="primaryButton")
        self.cancel_edit_button = QPushButton("Cancel", box)
        row.addStretch(1)
        row.addWidget(self.cancel_edit_button)
        row.addWidget(self.resend_button)
        return box

    def _build_layout(self) -> None:
        header = QHBoxLayout()
        header.addWidget(self.role_label)
        header.addWidget(self.stats_label, 1)
        for button in (self.copy_button, self.edit_button, self.regenerate_button):
            header.addWidget(button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        layout.addLayout(header)
        layout.addWidget(self.chips)
        layout.addWidget(self.image_strip)
        layout.addWidget(self.reasoning)
        layout.addWidget(self.body)
        layout.addWidget(self.editor)
        layout.addWidget(self.editor_buttons)

    def _connect(self) -> None:
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self.edit_button.clicked.connect(self._on_edit_button_clicked)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.resend_button.clicked.connect(self._on_resend_button_clicked)
        self.cancel_edit_button.clicked.connect(self._on_cancel_edit_button_clicked)
        self.body.code_action_requested.connect(self._on_body_code_action_requested)
        self.image_strip.opened.connect(self._on_image_strip_opened)

    def _show_editor(self, is_editing: bool) -> None:
        self.editor.setVisible(is_editing)
        self.editor_buttons.setVisible(is_editing)
        self.body.setVisible(not is_editing)

    @Slot("qint64")
    def _on_image_strip_opened(self, index: int) -> None:
        self.image_viewer = ImageViewerDialog(self.images[index], f"Image {index + 1} of your message", self)
        self.image_viewer.open()

    @Slot()
    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self._message.content)

    @Slot()
    def _on_edit_button_clicked(self) -> None:
        self.editor.setPlainText(self._message.content)
        self._show_editor(True)
        self.editor.setFocus()

    @Slot()
    def _on_resend_button_clicked(self) -> None:
        self._show_editor(False)
        self.resend_requested.emit(self.editor.toPlainText())

    @Slot()
    def _on_cancel_edit_button_clicked(self) -> None:
        self._show_editor(False)

    @Slot(str, int)
    def _on_body_code_action_requested(self, action: str, index: int) -> None:
        blocks = code_blocks(display_markdown(self._message))
        if index >= len(blocks):
            return
        code = blocks[index].code
        if action == "copy":
            QGuiApplication.clipboard().setText(code)
        elif action == "save":
            path, _ = QFileDialog.getSaveFileName(self, "Save code as", str(Path.home()))
            if path:
                Path(path).write_text(code, encoding="utf-8")
        elif action == "continue":
            self.continue_code_requested.emit(code)
