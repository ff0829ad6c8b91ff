"""Code mode's "Complete at cursor": for a model with fill-in-the-middle tokens the code button sends the text
before the cursor as the prompt and the text after it as the suffix; at the end of the text, or for a model
without FIM tokens, it continues the code as before."""

from PySide6.QtGui import QTextCursor

from app.chat.composer_widget import ComposerWidget
from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.engine_bridge import EngineBridge
from tests.scripted_engine import ScriptedEngine

CODE_BEFORE, CODE_AFTER = "def add(a, b):\n    return ", "\n\nprint(add(1, 2))\n"


def composer_with_cursor(qtbot, has_fim: bool, cursor: int) -> ComposerWidget:
    composer = ComposerWidget()
    qtbot.addWidget(composer)
    composer.set_code_mode(True)
    composer.set_ready(True)
    composer.set_fill_in_middle(has_fim)
    composer.editor.setPlainText(CODE_BEFORE + CODE_AFTER)
    text_cursor = composer.editor.textCursor()
    text_cursor.setPosition(cursor, QTextCursor.MoveMode.MoveAnchor)
    composer.editor.setTextCursor(text_cursor)
    return composer


def test_the_button_fills_at_the_cursor_for_a_fim_model(qtbot):
    composer = composer_with_cursor(qtbot, True, len(CODE_BEFORE))
    assert composer.continue_button.text() == "Complete at cursor"
    with qtbot.waitSignal(composer.fill_requested) as filled:
        composer.continue_button.click()
    assert filled.args == [CODE_BEFORE, CODE_AFTER]


def test_at_the_end_or_without_fim_tokens_it_continues(qtbot):
    for has_fim, cursor in ((True, len(CODE_BEFORE + CODE_AFTER)), (False, len(CODE_BEFORE))):
        composer = composer_with_cursor(qtbot, has_fim, cursor)
        with qtbot.waitSignal(composer.continue_requested) as continued:
            composer.continue_button.click()
        assert continued.args == [CODE_BEFORE + CODE_AFTER]


def test_the_request_carries_the_suffix(qtbot, tmp_path):
    engine, bridge = ScriptedEngine([("a + b", "")]), EngineBridge()
    settings = GenerationSettings("code", "", 0.0, 1.0, 8)
    controller = GenerationController(ConversationModel(ConversationStore(tmp_path / "c.sqlite")), bridge,
                                      lambda: engine, lambda: settings)
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        assert controller.fill_code(CODE_BEFORE, CODE_AFTER)
    request = engine.requests[-1]
    assert (request.prompt, request.suffix, request.messages) == (CODE_BEFORE, CODE_AFTER, None)
