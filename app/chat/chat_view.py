"""The open conversation as a scrolling column of MessageWidgets, kept in step with a ConversationModel.
Follows the newest text while the user is at the bottom; stays put when they scrolled up to read."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal, Slot
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from app.chat.conversation_model import ConversationModel
from app.chat.image_mime import has_offered_files
from app.chat.markdown_render import RenderStyle
from app.chat.message_widget import MessageWidget

BOTTOM_SLACK_PX = 48
EMPTY_TEXT = ("<h3>Ask anything</h3><p>Ctrl+Enter sends · Esc stops · Ctrl+N starts a new chat.<br>"
              "In code mode, attach files or a folder as context, or continue a piece of code.</p>")


class ChatView(QScrollArea):
    regenerate_requested = Signal("qint64")
    resend_requested = Signal("qint64", str)
    continue_code_requested = Signal(str)
    files_dropped = Signal(QMimeData)  # files or an image dropped onto the conversation (for the message box)

    def __init__(self, model: ConversationModel, style: RenderStyle, parent: QWidget | None = None):
        super().__init__(parent)
        self._model, self._style = model, style
        self._widgets: list[MessageWidget] = []
        self._is_code_mode, self._are_actions_enabled = False, True
        self._is_following = True
        self.setObjectName("chatView")
        self.setAccessibleName("Conversation")
        self.setWidgetResizable(True)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        canvas = QWidget(objectName="chatCanvas")
        self._column = QVBoxLayout(canvas)
        self._column.setContentsMargins(16, 12, 16, 12)
        self._column.setSpacing(10)
        self._empty_label = QLabel(EMPTY_TEXT, canvas, objectName="mutedLabel", alignment=Qt.AlignmentFlag.AlignCenter)
        self._column.addWidget(self._empty_label)
        self.context_marker = QLabel("", canvas, objectName="contextMarker", alignment=Qt.AlignmentFlag.AlignCenter)
        self.context_marker.setAccessibleName("Messages left out of the context")
        self.context_marker.hide()
        self._column.addStretch(1)
        self.setWidget(canvas)
        self.setAcceptDrops(True)
        model.reset.connect(self._on_model_reset)
        model.message_appended.connect(self._on_model_message_appended)
        model.message_changed.connect(self._on_model_message_changed)
        model.truncated.connect(self._on_model_truncated)
        self.verticalScrollBar().valueChanged.connect(self._on_scroll_value_changed)
        self.verticalScrollBar().rangeChanged.connect(self._on_scroll_range_changed)

    @property
    def message_widgets(self) -> list[MessageWidget]:
        return list(self._widgets)

    def set_render_style(self, style: RenderStyle) -> None:
        self._style = style
        for widget in self._widgets:
            widget.set_render_style(style)

    def set_code_mode(self, is_code_mode: bool) -> None:
        self._is_code_mode = is_code_mode
        for widget in self._widgets:
            widget.set_code_mode(is_code_mode)

    def set_actions_enabled(self, is_enabled: bool) -> None:
        self._are_actions_enabled = is_enabled
        for widget in self._widgets:
            widget.set_actions_enabled(is_enabled)

    @Slot()
    def _on_model_reset(self) -> None:
        self._on_model_truncated(0)
        for index in range(len(self._model.messages)):
            self._on_model_message_appended(index)
        self._is_following = True

    @Slot("qint64")
    def _on_model_message_appended(self, index: int) -> None:
        widget = MessageWidget(self._model.messages[index], self._style, self.widget(), self._model.store.images.get)
        widget.set_code_mode(self._is_code_mode)
        widget.set_actions_enabled(self._are_actions_enabled)
        widget.regenerate_requested.connect(lambda: self.regenerate_requested.emit(self._widgets.index(widget)))
        widget.resend_requested.connect(lambda text: self.resend_requested.emit(self._widgets.index(widget), text))
        widget.continue_code_requested.connect(lambda code: self._continue_code(self._widgets.index(widget), code))
        self._column.insertWidget(self._column.count() - 1, widget)
        self._widgets.append(widget)
        self._empty_label.hide()
        self._place_context_marker()

    @Slot("qint64")
    def _on_model_message_changed(self, index: int) -> None:
        self._widgets[index].set_message(self._model.messages[index])
        if index == len(self._widgets) - 1:
            self._place_context_marker()

    @Slot("qint64")
    def _on_model_truncated(self, index: int) -> None:
        for widget in self._widgets[index:]:
            self._column.removeWidget(widget)
            widget.deleteLater()
        del self._widgets[index:]
        self._empty_label.setVisible(not self._widgets)
        self._place_context_marker()

    def _place_context_marker(self) -> None:
        """A line above the first message the latest reply's prompt sent after leaving earlier ones out."""
        self._column.removeWidget(self.context_marker)
        dropped = next((w.message.info.get("dropped") for w in reversed(self._widgets)
                        if w.message.role == "assistant"), None)
        if not dropped or dropped[1] >= len(self._widgets):
            self.context_marker.hide()
            return
        start, end = dropped
        where = "earlier " if start == 0 else ""
        self.context_marker.setText(f"⋯ {end - start} {where}message{'s' if end - start > 1 else ''} above "
                                    f"{'are' if end - start > 1 else 'is'} not sent to the model: the context is full ⋯")
        self._column.insertWidget(self._column.indexOf(self._widgets[end]), self.context_marker)
        self.context_marker.show()

    def _continue_code(self, index: int, code: str) -> None:
        """A continuation's code block continues the code it was generated from, so send both."""
        message = self._widgets[index].message
        if message.kind == "completion" and message.role == "assistant" and index > 0:
            code = self._widgets[index - 1].message.content + code
        self.continue_code_requested.emit(code)

    def dragEnterEvent(self, event) -> None:
        if has_offered_files(event.mimeData()):
            event.acceptProposedAction()

    def dragMoveEvent(self, event) -> None:
        if has_offered_files(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:
        if has_offered_files(event.mimeData()):
            event.acceptProposedAction()
            self.files_dropped.emit(event.mimeData())

    @Slot(int)
    def _on_scroll_value_changed(self, value: int) -> None:
        self._is_following = value >= self.verticalScrollBar().maximum() - BOTTOM_SLACK_PX

    @Slot(int, int)
    def _on_scroll_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._is_following:
            self.verticalScrollBar().setValue(maximum)
