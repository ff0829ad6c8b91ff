"""A conversation longer than the model's context (a long chat, or one carried over to a model with a smaller
context) keeps going: by default the oldest turns are left out of the prompt (the system prompt stays), a line in
the conversation marks where, and the status bar says so. Per chat, the middle can go instead (the first turn
stays), or the chat stops and says why: a refused turn keeps nothing (the text stays in the input box), so
retrying does not grow the chat."""

import re

from app.chat.conversation_store import ConversationStore, Message
from app.chat.export import to_markdown
from app.engine_api import api
from tests.app.driving import type_and_send, use_greedy_sampling, wait_for_error_dialog, wait_until_idle

SYSTEM = "Be brief."
WORDS = "the quick brown fox jumps over the lazy dog and keeps running through the long green field " * 4


def long_conversation(data_dir, num_turns: int = 10) -> int:
    store = ConversationStore(data_dir / "conversations.sqlite3")
    conversation = store.create("long", "chat", SYSTEM)
    for turn in range(num_turns):
        store.add_message(conversation.id, 2 * turn, Message("user", f"question {turn}: {WORDS}"))
        store.add_message(conversation.id, 2 * turn + 1, Message("assistant", f"answer {turn}: {WORDS}",
                                                                 info={"reason": "stop"}))
    store.close()
    return conversation.id


def prompt_tokens_of(window, messages) -> int:
    chat = [{"role": "system", "content": SYSTEM}] + [{"role": m.role, "content": m.content} for m in messages]
    return window.loader.engine.count_prompt_tokens(api().GenerateRequest(messages=tuple(chat)))


def send_and_wait(qtbot, window, text: str):
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        type_and_send(qtbot, window, text)
    wait_until_idle(qtbot, window)
    return finished.args[0]


def choose_policy(qtbot, window, policy: str) -> None:
    combo = window.status.policy_combo
    combo.setCurrentIndex(combo.findData(policy))
    combo.activated.emit(combo.currentIndex())  # what a click on the item does
    assert window.conversation.context_policy == policy


def test_a_conversation_longer_than_the_context_keeps_going_and_marks_what_it_left_out(qtbot, start_app, data_dir):
    conversation_id = long_conversation(data_dir)
    window = start_app()
    window.open_conversation(conversation_id)
    use_greedy_sampling(window, max_tokens=16, system_prompt=SYSTEM)
    maximum = window.loader.engine.info.max_model_len
    assert prompt_tokens_of(window, window.conversation.messages) > maximum  # as the engine would refuse it
    qtbot.waitUntil(lambda: "left out" in window.status.context_label.text(), timeout=5000)
    assert window.status.policy_combo.currentData() == "drop_oldest"

    event = send_and_wait(qtbot, window, "and now?")
    assert event.reason in ("stop", "length"), event.error
    messages = window.conversation.messages
    start, end = messages[-1].info["dropped"]
    assert start == 0 and 0 < end < len(messages) - 2 and messages[end].role == "user"
    assert event.stats.prompt_tokens == prompt_tokens_of(window, messages[end:-1]) < maximum
    marker = window.chat.view.context_marker
    assert marker.isVisible() and f"{end} earlier messages" in marker.text()
    column = window.chat.view.widget().layout()
    assert column.indexOf(marker) == column.indexOf(window.chat.view.message_widgets[end]) - 1
    used = int(re.match(r"Context ([\d,]+)", window.status.context_label.text())[1].replace(",", ""))
    assert used < maximum

    choose_policy(qtbot, window, "truncate_middle")
    event = send_and_wait(qtbot, window, "and the middle?")
    assert event.reason in ("stop", "length"), event.error
    messages = window.conversation.messages
    start, end = messages[-1].info["dropped"]
    assert start == 2 and end > start  # the first turn is still sent
    assert event.stats.prompt_tokens == prompt_tokens_of(window, messages[:2] + messages[end:-1])

    choose_policy(qtbot, window, "stop")
    kept = list(window.conversation.messages)
    for _ in range(2):  # a refused turn keeps nothing, so a retry is refused the same way
        type_and_send(qtbot, window, "and stop?")
        dialog = wait_for_error_dialog(qtbot, window)
        assert "context holds" in dialog.text() and "new chat" in dialog.text()
        dialog.accept()
        wait_until_idle(qtbot, window)
        assert window.conversation.messages == kept and window.store.messages(conversation_id) == kept
        assert window.chat.composer.text() == "and stop?"  # still in the input box
    markdown = to_markdown(window.store.get(conversation_id), window.store.messages(conversation_id))
    assert "and stop?" not in markdown

    window.new_chat()
    assert window.status.policy_combo.currentData() == "drop_oldest"  # a new chat starts with the default
    window.open_conversation(conversation_id)
    assert window.status.policy_combo.currentData() == "stop"  # the policy is the chat's own
