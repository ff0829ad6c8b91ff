"""Where the user writes: the message box with Send, Stop and, in code mode, "Continue as code"; images attached
(the button or Ctrl+Shift+A), pasted or dropped show as thumbnails above it until the message is sent.
Ctrl+Enter sends from the box itself (the window's Send action has the same shortcut for the menus)."""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt, Signal, Slot
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QFileDialog, QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.chat.image_mime import OfferedImages, has_offered_files, offered_images, paths_of_images
from app.chat.image_strip_widget import ImageStripWidget
from app.chat.image_viewer_dialog import ImageViewerDialog
from app.chat.images import FILE_FILTER, NO_IMAGES
from app.icons import icon

ATTACH_SHORTCUT = "Ctrl+Shift+A"


class _MessageEditWidget(QPlainTextEdit):
    submitted = Signal()
    files_offered = Signal(QMimeData)  # files or an image pasted or dropped into the box (text goes in as text)

    def canInsertFromMimeData(self, source: QMimeData) -> bool:
        return has_offered_files(source) or super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:
        if has_offered_files(source):
            self.files_offered.emit(source)
        else:
            super().insertFromMimeData(source)

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
        self.attach_button = QPushButton(icon("attach"), "Image…", self)
        self.attach_button.setAccessibleName("Attach images")
        self.image_strip = ImageStripWidget(is_removable=True, parent=self)
        self.notice_label = QLabel("", self, objectName="mutedLabel", wordWrap=True)
        self.notice_label.setAccessibleName("Why an image was not attached")
        self.notice_label.hide()
        self.image_viewer: ImageViewerDialog | None = None
        self._images: list[bytes] = []
        self._is_ready, self._is_busy, self._has_fill_in_middle = False, False, False
        self._sees_images = False
        self._build_layout()
        QShortcut(QKeySequence(ATTACH_SHORTCUT), self, self.attach_images)
        self.attach_button.clicked.connect(self.attach_images)
        self.editor.files_offered.connect(self.offer)
        self.image_strip.removed.connect(self._on_image_strip_removed)
        self.image_strip.opened.connect(self._on_image_strip_opened)
        self.editor.submitted.connect(self._on_editor_submitted)
        self.send_button.clicked.connect(self._on_editor_submitted)
        self.continue_button.clicked.connect(self._on_continue_button_clicked)
        self.stop_button.clicked.connect(self.stop_requested)
        self.set_code_mode(False)
        self.set_sees_images(False)
        self._update_buttons()

    def _build_layout(self) -> None:
        buttons = QVBoxLayout()
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addWidget(self.continue_button)
        buttons.addWidget(self.attach_button)
        buttons.addStretch(1)
        writing = QVBoxLayout()
        writing.addWidget(self.image_strip)
        writing.addWidget(self.notice_label)
        writing.addWidget(self.editor, 1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(writing, 1)
        layout.addLayout(buttons)

    def set_sees_images(self, sees_images: bool) -> None:
        """The loaded model takes images: the attach button works, and pasted or dropped images are attached."""
        self._sees_images = sees_images
        self.attach_button.setEnabled(sees_images)
        self.attach_button.setToolTip(f"Attach images to the message ({ATTACH_SHORTCUT})" if sees_images
                                      else NO_IMAGES)

    def images(self) -> list[bytes]:
        return list(self._images)

    def attach_images(self) -> None:
        if not self._sees_images:
            self._show_notice(NO_IMAGES)
            return
        paths, _ = QFileDialog.getOpenFileNames(self, "Attach images", "", FILE_FILTER)
        if paths:
            self._add(paths_of_images(paths))

    @Slot(QMimeData)
    def offer(self, mime: QMimeData) -> None:
        """Files or an image pasted or dropped: images are attached, anything else is refused with a line why."""
        if not self._sees_images:
            self._show_notice(NO_IMAGES)
            return
        self._add(offered_images(mime))

    def _add(self, offered: OfferedImages) -> None:
        self._images += offered.images
        self.image_strip.set_images(self._images)
        self._show_notice("; ".join(offered.problems))

    def _show_notice(self, text: str) -> None:
        self.notice_label.setText(text)
        self.notice_label.setVisible(bool(text))

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
        self._images = []
        self.image_strip.set_images([])
        self._show_notice("")

    def submit(self) -> None:
        self._on_editor_submitted()

    def _update_buttons(self) -> None:
        can_send = self._is_ready and not self._is_busy
        self.send_button.setEnabled(can_send)
        self.continue_button.setEnabled(can_send)
        self.stop_button.setEnabled(self._is_busy)

    @Slot()
    def _on_editor_submitted(self) -> None:
        if not self.send_button.isEnabled() or not (self.text().strip() or self._images):
            return
        if self._images and not self._sees_images:  # attached for an earlier model: the user chooses
            self._show_notice(f"{NO_IMAGES}. Remove the images to send the text alone.")
            return
        self.send_requested.emit(self.text())

    @Slot("qint64")
    def _on_image_strip_removed(self, index: int) -> None:
        del self._images[index]
        self.image_strip.set_images(self._images)

    @Slot("qint64")
    def _on_image_strip_opened(self, index: int) -> None:
        self.image_viewer = ImageViewerDialog(self._images[index], f"Image {index + 1}", self)
        self.image_viewer.open()

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
