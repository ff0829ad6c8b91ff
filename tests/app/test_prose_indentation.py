"""Code outside a fence (pasted into a question, or an unfenced reply) keeps its indentation in the chat."""

from PySide6.QtGui import QTextDocument

from app.chat.conversation_store import Message
from app.chat.markdown_render import render_markdown
from app.theme import resolve_theme

CODE = "def area(width, height):\n    if width < 0:\n\treturn 0\n    return width * height"


def shown_text(markdown: str) -> str:
    document = QTextDocument()
    document.setHtml(render_markdown(markdown, resolve_theme("light").render_style))
    return document.toPlainText().replace("\xa0", " ")


def test_unfenced_code_keeps_its_indentation(qapp):
    assert shown_text(CODE) == "def area(width, height):\n    if width < 0:\n    return 0\n    return width * height"


def test_a_pasted_question_shows_indented_in_its_bubble(qtbot):
    from app.chat.message_widget import MessageWidget

    widget = MessageWidget(Message("user", f"why is this wrong?\n{CODE}"), resolve_theme("light").render_style)
    qtbot.addWidget(widget)
    assert "\n    if width < 0:\n" in widget.body.toPlainText().replace("\xa0", " ")
