"""A reasoning model's reply in the app: the reasoning streams into a collapsible section above the answer
(closed at first), is saved with the message, and the next turn sends the answer alone."""

from PySide6.QtCore import Qt

from app.chat.chat_view import ChatView
from app.chat.conversation_model import ConversationModel
from app.chat.conversation_store import ConversationStore
from app.chat.export import to_markdown
from app.chat.generation_controller import GenerationController, GenerationSettings
from app.chat.markdown_render import RenderStyle
from app.engine_bridge import EngineBridge
from tests.scripted_engine import REASONING_REPLY, ScriptedEngine

STYLE = RenderStyle("default", "#f6f8fa", "#eeeeee", "#888888", "#0969da")
SETTINGS = GenerationSettings(mode="chat", system_prompt="", temperature=0.0, top_p=1.0, max_tokens=16)
REASONING = "The user greets me. Reply briefly."


def chat_parts(qtbot, tmp_path):
    store = ConversationStore(tmp_path / "chats.sqlite")
    model = ConversationModel(store)
    bridge = EngineBridge()
    engine = ScriptedEngine(REASONING_REPLY)
    controller = GenerationController(model, bridge, lambda: engine, lambda: SETTINGS)
    view = ChatView(model, STYLE)
    qtbot.addWidget(view)
    return store, model, bridge, engine, controller, view


def test_reasoning_streams_into_a_closed_section_above_the_answer(qtbot, tmp_path):
    store, model, bridge, engine, controller, view = chat_parts(qtbot, tmp_path)
    streamed, toggle_texts = [], []
    bridge.reasoning_arrived.connect(lambda request_id, reasoning: streamed.append(reasoning))
    model.message_changed.connect(
        lambda index: toggle_texts.append(view.message_widgets[index].reasoning.toggle_button.text()))
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        assert controller.send("Hi")
    view.show()
    reply = model.messages[-1]
    assert (reply.content, reply.info["reasoning"]) == ("Hello there!", REASONING)
    assert "".join(streamed) == REASONING and "Thinking…" in toggle_texts  # shown while it streamed
    section = view.message_widgets[-1].reasoning
    assert section.isVisible() and not section.text_label.isVisible()
    assert section.toggle_button.text() == "Reasoning (6 words)"
    qtbot.mouseClick(section.toggle_button, Qt.MouseButton.LeftButton)
    assert section.text_label.isVisible() and section.text_label.text() == REASONING
    assert view.message_widgets[0].reasoning.isHidden()  # the user's message has none
    saved = store.messages(model.conversation.id)[-1]
    assert saved.info["reasoning"] == REASONING
    assert f"<details><summary>Reasoning</summary>\n\n{REASONING}" in to_markdown(model.conversation, model.messages)


def test_the_next_turn_sends_the_answer_without_its_reasoning(qtbot, tmp_path):
    _, _, bridge, engine, controller, _ = chat_parts(qtbot, tmp_path)
    for text in ("Hi", "And again"):
        with qtbot.waitSignal(bridge.finished, timeout=10_000):
            assert controller.send(text)
    assert engine.requests[1].messages[1] == {"role": "assistant", "content": "Hello there!"}


def test_a_reply_without_reasoning_has_no_section(qtbot, tmp_path):
    _, model, bridge, engine, controller, view = chat_parts(qtbot, tmp_path)
    engine.pieces = [("Just", ""), (" this.", "")]
    with qtbot.waitSignal(bridge.finished, timeout=10_000):
        controller.send("Hi")
    assert "reasoning" not in model.messages[-1].info and view.message_widgets[-1].reasoning.isHidden()
