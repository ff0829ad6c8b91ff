"""The middle of the window: generation settings, the conversation, code context (code mode) and the composer,
wired to a GenerationController."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.chat.chat_view import ChatView
from app.chat.code_context_widget import CodeContextWidget
from app.chat.composer_widget import ComposerWidget
from app.chat.conversation_model import ConversationModel
from app.chat.generation_controller import GenerationController
from app.chat.generation_settings_widget import GenerationSettingsWidget
from app.chat.markdown_render import RenderStyle


class ChatWidget(QWidget):
    mode_changed = Signal(str)

    def __init__(self, model: ConversationModel, controller: GenerationController, style: RenderStyle,
                 parent: QWidget | None = None):
        super().__init__(parent)
        self._model, self._controller = model, controller
        self._mode = "chat"
        self.settings_bar = GenerationSettingsWidget(self)
        self.view = ChatView(model, style, self)
        self.code_context = CodeContextWidget(self)
        self.composer = ComposerWidget(self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.settings_bar)
        layout.addWidget(self.view, 1)
        layout.addWidget(self.code_context)
        layout.addWidget(self.composer)
        self._connect()
        self.set_mode("chat")

    @property
    def mode(self) -> str:
        return self._mode

    def _connect(self) -> None:
        self.composer.send_requested.connect(self._on_composer_send_requested)
        self.composer.continue_requested.connect(self._on_composer_continue_requested)
        self.composer.fill_requested.connect(self._on_composer_fill_requested)
        self.composer.stop_requested.connect(self._controller.stop)
        self.view.regenerate_requested.connect(self._controller.regenerate)
        self.view.resend_requested.connect(self._controller.edit_and_resend)
        self.view.continue_code_requested.connect(self._controller.continue_code)
        self.view.files_dropped.connect(self.composer.offer)
        self._controller.busy_changed.connect(self._on_controller_busy_changed)
        self._model.reset.connect(self._on_model_reset)

    def set_mode(self, mode: str) -> None:
        self._mode = mode
        is_code = mode == "code"
        self.settings_bar.set_mode(mode)
        self.code_context.setVisible(is_code)
        self.composer.set_code_mode(is_code)
        self.view.set_code_mode(is_code)
        self.mode_changed.emit(mode)

    def set_ready(self, is_ready: bool) -> None:
        self.composer.set_ready(is_ready)

    @Slot(str)
    def _on_composer_send_requested(self, text: str) -> None:
        is_code = self._mode == "code"
        context = self.code_context.context_text() if is_code else ""
        attached = self.code_context.attached_paths() if is_code else ()
        if self._controller.send(text, context, attached, tuple(self.composer.images())):
            self.composer.clear()
            self.code_context.clear()

    @Slot(str)
    def _on_composer_continue_requested(self, code: str) -> None:
        if self._controller.continue_code(code):
            self.composer.clear()

    @Slot(str, str)
    def _on_composer_fill_requested(self, prefix: str, suffix: str) -> None:
        if self._controller.fill_code(prefix, suffix):
            self.composer.clear()

    @Slot(bool)
    def _on_controller_busy_changed(self, is_busy: bool) -> None:
        self.composer.set_busy(is_busy)
        self.view.set_actions_enabled(not is_busy)

    @Slot()
    def _on_model_reset(self) -> None:
        conversation = self._model.conversation
        if conversation is not None:
            if conversation.mode != self._mode:
                self.set_mode(conversation.mode)
            self.settings_bar.set_system_prompt(conversation.system_prompt)
        else:
            self.settings_bar.set_mode(self._mode)
