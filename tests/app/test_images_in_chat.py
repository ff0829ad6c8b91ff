"""Images in the app: attached by the button's file dialog, pasted from the clipboard or dropped onto the message
box or the conversation; thumbnails above the box until sent, then in the chat; the request carries the bytes;
the conversation store keeps them (a reopened chat shows them) and exports embed them; what is not an image, or
is over 20 MB, is refused with a line in the window and nothing else changes."""

import base64
import json
from types import SimpleNamespace

from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QColor, QDragEnterEvent, QDropEvent, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QFileDialog

from app.chat.chat_widget import ChatWidget
from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.export import to_json, to_markdown
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.chat.image_mime import png_bytes
from app.chat.image_parts import sees_images
from app.chat.images import NO_IMAGES
from app.chat.markdown_render import RenderStyle
from app.engine_bridge import EngineBridge
from tests.scripted_engine import ScriptedEngine, request_images

STYLE = RenderStyle("default", "#f6f8fa", "#eeeeee", "#888888", "#0969da")
SETTINGS = GenerationSettings(mode="chat", system_prompt="", temperature=0.0, top_p=1.0, max_tokens=16)


def picture(width: int, height: int, color: str = "#3366cc") -> bytes:
    image = QImage(width, height, QImage.Format.Format_RGB32)
    image.fill(QColor(color))
    return png_bytes(image)


def chat_parts(qtbot, database, engine):
    model = ConversationModel(ConversationStore(database))
    bridge = EngineBridge()
    controller = GenerationController(model, bridge, lambda: engine, lambda: SETTINGS)
    chat = ChatWidget(model, controller, STYLE)
    qtbot.addWidget(chat)
    chat.set_ready(True)
    chat.composer.set_sees_images(sees_images(engine))
    chat.show()
    chat.activateWindow()  # shortcuts (Ctrl+Shift+A) reach the active window
    qtbot.waitUntil(chat.isActiveWindow)
    return SimpleNamespace(model=model, bridge=bridge, controller=controller, chat=chat, composer=chat.composer)


def send(qtbot, parts, text: str) -> None:
    parts.composer.editor.setPlainText(text)
    with qtbot.waitSignal(parts.bridge.finished, timeout=10_000):
        parts.composer.send_button.click()


def drop(widget, paths) -> bool:
    """Drag files onto the widget and drop them, as a file manager does; -> was the drop accepted?"""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    buttons, modifiers = Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier
    QApplication.sendEvent(widget, QDragEnterEvent(QPoint(10, 10), Qt.DropAction.CopyAction, mime, buttons, modifiers))
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, buttons, modifiers)
    QApplication.sendEvent(widget, event)
    return event.isAccepted()


def test_an_attached_image_goes_with_the_message_and_stays_with_the_chat(qtbot, tmp_path, monkeypatch):
    screenshot = picture(40, 30)
    (tmp_path / "error.png").write_bytes(screenshot)
    chosen = []
    monkeypatch.setattr(QFileDialog, "getOpenFileNames",
                        lambda *args: (chosen.append(args) or [str(tmp_path / "error.png")], ""))
    engine = ScriptedEngine([("A", ""), (" cat.", "")], sees_images=True)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    assert parts.composer.attach_button.isEnabled()
    qtbot.keyClick(parts.composer.editor, Qt.Key.Key_A,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert chosen and "*.png" in chosen[0][3]  # the dialog is filtered to images
    assert parts.composer.images() == [screenshot] and len(parts.composer.image_strip.thumbnails) == 1
    send(qtbot, parts, "What does this error say?")
    request = engine.requests[-1]
    assert request_images(request) == [screenshot]
    assert request.messages[-1]["content"][-1] == {"type": "text", "text": "What does this error say?"}
    assert parts.composer.images() == [] and parts.composer.image_strip.isHidden()  # sent: the strip is empty
    shown = parts.chat.view.message_widgets[0]
    assert shown.images == [screenshot] and shown.image_strip.isVisible()
    qtbot.mouseClick(shown.image_strip.thumbnails[0], Qt.MouseButton.LeftButton)
    assert shown.image_viewer.isVisible() and shown.image_viewer.image_label.pixmap().width() == 40

    conversation_id = parts.model.conversation.id
    reopened = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)  # as after a restart: a new store, same files
    assert reopened.model.open(conversation_id)
    assert reopened.chat.view.message_widgets[0].images == [screenshot]
    send(qtbot, reopened, "And now?")
    assert request_images(engine.requests[-1]) == [screenshot]  # the earlier turn's image is sent again


def test_a_pasted_image_and_dropped_files_are_attached_and_can_be_removed(qtbot, tmp_path):
    engine = ScriptedEngine([("Ok", "")], sees_images=True)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    image = QImage(12, 8, QImage.Format.Format_RGB32)
    image.fill(QColor("#ff0000"))
    QGuiApplication.clipboard().setImage(image)
    parts.composer.editor.paste()
    pasted = QImage.fromData(parts.composer.images()[0])
    assert (pasted.width(), pasted.height(), pasted.pixelColor(3, 3).name()) == (12, 8, "#ff0000")
    assert parts.composer.editor.toPlainText() == ""  # an image, not text

    (tmp_path / "a.png").write_bytes(picture(5, 5))
    (tmp_path / "b.png").write_bytes(picture(6, 6))
    assert drop(parts.chat.view.viewport(), [tmp_path / "a.png"])  # onto the conversation
    drop(parts.composer.editor.viewport(), [tmp_path / "b.png"])  # onto the message box
    assert parts.composer.images()[1:] == [picture(5, 5), picture(6, 6)]
    assert len(parts.composer.image_strip.thumbnails) == 3
    qtbot.mouseClick(parts.composer.image_strip.remove_buttons[1], Qt.MouseButton.LeftButton)
    assert parts.composer.images()[1:] == [picture(6, 6)] and len(parts.composer.image_strip.thumbnails) == 2


def test_what_is_not_an_image_or_too_big_is_refused_and_nothing_is_lost(qtbot, tmp_path, monkeypatch):
    engine = ScriptedEngine([("Ok", "")], sees_images=True)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    (tmp_path / "notes.txt").write_text("not a picture")
    huge = tmp_path / "huge.png"
    with huge.open("wb") as file:  # a PNG header and 21 MB (sparse)
        file.write(picture(2, 2))
        file.truncate(21 * 1024 * 1024)
    (tmp_path / "ok.png").write_bytes(picture(3, 3))
    parts.composer.editor.setPlainText("keep this text")
    drop(parts.composer.editor.viewport(), [tmp_path / "notes.txt", huge, tmp_path / "ok.png"])
    notice = parts.composer.notice_label
    assert notice.isVisible()
    assert "notes.txt is not an image" in notice.text() and "huge.png is 21.0 MB" in notice.text()
    assert "at most 20 MB" in notice.text()
    assert parts.composer.images() == [picture(3, 3)]  # the image among them is attached
    assert parts.composer.editor.toPlainText() == "keep this text"
    monkeypatch.setattr(QFileDialog, "getOpenFileNames", lambda *args: ([str(tmp_path / "notes.txt")], ""))
    parts.composer.attach_button.click()
    assert parts.composer.images() == [picture(3, 3)] and "notes.txt is not an image" in notice.text()


def test_a_model_without_images_disables_attaching_and_says_why(qtbot, tmp_path):
    engine = ScriptedEngine([("Ok", "")])
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    composer = parts.composer
    assert not composer.attach_button.isEnabled() and composer.attach_button.toolTip() == NO_IMAGES
    (tmp_path / "a.png").write_bytes(picture(5, 5))
    drop(composer.editor.viewport(), [tmp_path / "a.png"])
    assert composer.images() == [] and composer.notice_label.text() == NO_IMAGES
    QGuiApplication.clipboard().setImage(QImage.fromData(picture(4, 4)))
    composer.editor.paste()
    assert composer.images() == [] and composer.notice_label.isVisible()


def test_a_remote_server_gets_the_images(qtbot, tmp_path):
    scripted = ScriptedEngine([("Ok", "")], sees_images=True)
    # a remote server's engine cannot know what the server's model takes: the app sends, the server answers
    remote = SimpleNamespace(info=SimpleNamespace(**{**vars(scripted.info), "model_type": "remote"}),
                             submit=scripted.submit, cancel=scripted.cancel)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", remote)
    assert parts.composer.attach_button.isEnabled()
    image = picture(4, 4)
    parts.controller.send("Describe", images=(image,))
    qtbot.waitUntil(lambda: not parts.controller.is_busy, timeout=10_000)
    image_part, text_part = scripted.requests[-1].messages[-1]["content"]  # engine.api sends them as data URLs
    assert image_part == {"type": "image", "image": image}
    assert text_part == {"type": "text", "text": "Describe"}


def test_exports_embed_the_images_and_deleting_the_chat_removes_them(qtbot, tmp_path):
    engine = ScriptedEngine([("Ok", "")], sees_images=True)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    image = picture(4, 4)
    parts.controller.send("Look", images=(image,))
    qtbot.waitUntil(lambda: not parts.controller.is_busy, timeout=10_000)
    store, conversation = parts.model.store, parts.model.conversation
    messages = store.messages(conversation.id)
    markdown = to_markdown(conversation, messages, store.images.get)
    assert f"![image 1](data:image/png;base64,{base64.b64encode(image).decode()})" in markdown
    exported = json.loads(to_json(conversation, messages, store.images.get))["messages"][0]["images"][0]
    assert base64.b64decode(exported["base64"]) == image and exported["mime"] == "image/png"
    digest = messages[0].info["images"][0]
    assert store.images.path(digest).read_bytes() == image
    store.delete(conversation.id)
    assert not store.images.path(digest).exists()


def test_the_app_with_a_text_only_model_offers_no_attaching(qtbot, start_app, tmp_path):
    window = start_app()  # the tiny qwen3_moe checkpoint: no vision tower
    composer = window.chat.composer
    assert composer.attach_button.isVisible() and not composer.attach_button.isEnabled()
    assert composer.attach_button.toolTip() == NO_IMAGES
    (tmp_path / "a.png").write_bytes(picture(5, 5))
    drop(window.chat.view.viewport(), [tmp_path / "a.png"])
    assert composer.images() == [] and composer.notice_label.text() == NO_IMAGES


def test_text_copied_with_a_picture_of_it_is_pasted_as_text(qtbot, tmp_path):
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", ScriptedEngine([("Ok", "")], sees_images=True))
    mime = QMimeData()
    mime.setText("a1\tb1")
    mime.setImageData(QImage.fromData(picture(4, 4)))  # as a spreadsheet copies cells
    QGuiApplication.clipboard().setMimeData(mime)
    parts.composer.editor.paste()
    assert parts.composer.editor.toPlainText() == "a1\tb1" and parts.composer.images() == []


def test_images_waiting_when_the_model_changes_to_one_without_images_are_not_dropped_silently(qtbot, tmp_path):
    engine = ScriptedEngine([("Ok", "")], sees_images=True)
    parts = chat_parts(qtbot, tmp_path / "chats.sqlite", engine)
    (tmp_path / "a.png").write_bytes(picture(5, 5))
    drop(parts.composer.editor.viewport(), [tmp_path / "a.png"])
    engine.sees_images = False
    parts.composer.set_sees_images(False)  # another model was loaded
    parts.composer.editor.setPlainText("What is this?")
    parts.composer.send_button.click()
    assert engine.requests == [] and parts.model.messages == []
    assert "Remove the images" in parts.composer.notice_label.text()
    assert parts.composer.images() == [picture(5, 5)] and parts.composer.text() == "What is this?"
    parts.composer.image_strip.remove_buttons[0].click()
    with qtbot.waitSignal(parts.bridge.finished, timeout=10_000):
        parts.composer.send_button.click()
    assert engine.requests[-1].messages[-1]["content"] == "What is this?"
