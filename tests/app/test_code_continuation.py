""""Continue as code" in code mode continues the code: the bundled demo model writes the method's body under its
header (a prompt ending in a bare line break used to read as a finished block: the model closed a code fence and
the card came out empty), a continuation is shown as code whatever backticks it holds, and one that adds nothing
says so instead of showing an empty card."""

from PySide6.QtCore import Qt

from app.chat.conversation_store import Message
from app.chat.markdown_render import code_blocks
from app.chat.message_widget import NOTHING_ADDED, display_markdown
from app.launch_options import DEMO
from tests.app.driving import use_greedy_sampling, wait_until_idle

CODE = 'class Stack:\n    """A last-in first-out stack."""\n\n    def push(self, item):\n'


def test_continue_as_code_writes_the_body_on_the_demo_model(qtbot, start_app):
    window = start_app(model=DEMO)
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.chat.mode == "code" and window.chat.composer.continue_button.isVisible()
    use_greedy_sampling(window, max_tokens=12)
    window.chat.composer.editor.setPlainText(CODE)
    qtbot.mouseClick(window.chat.composer.continue_button, Qt.MouseButton.LeftButton)
    wait_until_idle(qtbot, window, timeout=120_000)
    code, continuation = window.conversation.messages
    assert (code.kind, continuation.kind) == ("completion", "completion")
    assert continuation.content.startswith("\n        ") and "```" not in continuation.content
    assert continuation.info["generated_tokens"] > 3
    assert code.content == CODE.rstrip()  # the line break is the model's to write, with the indent after it
    card = window.chat.view.message_widgets[-1]
    assert code_blocks(display_markdown(card.message))[0].code == continuation.content
    assert continuation.content.strip() in card.body.toPlainText()


def test_a_continuation_shows_its_backticks_and_an_empty_one_says_so():
    with_fence = Message("assistant", "    x = 1\n```\nmore", kind="completion", info={"reason": "stop"})
    assert code_blocks(display_markdown(with_fence))[0].code == with_fence.content
    nothing = Message("assistant", "", kind="completion", info={"reason": "stop"})
    assert display_markdown(nothing) == NOTHING_ADDED
