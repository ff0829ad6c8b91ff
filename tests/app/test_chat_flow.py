"""Chat end to end on the real app: load, send, stream, stop, regenerate, edit, restart and find it again."""

from PySide6.QtCore import Qt

from app.chat import generation_controller

from tests.app.driving import messages, type_and_send, use_greedy_sampling, wait_until_idle


def test_loads_the_model_and_streams_a_reply(qtbot, start_app):
    window = start_app()
    assert window.chat.composer.send_button.isEnabled()
    assert "qwen3_moe" in window.status.model_label.text()
    use_greedy_sampling(window, max_tokens=60)
    batches = []
    window.bridge.text_arrived.connect(lambda request_id, text: batches.append(text))
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        type_and_send(qtbot, window, "def fib(n):")
    assert window.chat.composer.editor.toPlainText() == ""
    event = finished.args[0]
    wait_until_idle(qtbot, window)
    user, reply = messages(window)
    assert (user.role, user.content) == ("user", "def fib(n):")
    assert reply.role == "assistant" and reply.content == event.text
    assert "".join(batches) == event.text[: len("".join(batches))] and batches  # streamed before it finished
    assert reply.info["generated_tokens"] == event.stats.generated_tokens > 0
    widget = window.chat.view.message_widgets[-1]
    assert "tok/s" in widget.stats_label.text() or event.stats.generated_tokens == 1
    assert "first token" in widget.stats_label.text()
    assert window.status.context_label.text().startswith("Context ")


def test_stop_mid_stream_keeps_the_partial_reply(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=450, system_prompt="")
    with qtbot.waitSignal(window.bridge.text_arrived, timeout=30_000):
        type_and_send(qtbot, window, "hi")
    assert window.chat.composer.stop_button.isEnabled()
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        qtbot.keyClick(window, Qt.Key.Key_Escape)
    assert finished.args[0].reason == "cancelled"
    wait_until_idle(qtbot, window)
    reply = messages(window)[-1]
    assert reply.info["reason"] == "cancelled" and 0 < reply.info["generated_tokens"] < 450
    assert "stopped" in window.chat.view.message_widgets[-1].stats_label.text()
    assert window.chat.composer.send_button.isEnabled()


def test_regenerate_replaces_the_reply(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=20)
    type_and_send(qtbot, window, "hello")
    wait_until_idle(qtbot, window)
    old_widget = window.chat.view.message_widgets[-1]
    with qtbot.waitSignals([window.conversation.truncated, window.bridge.finished], timeout=30_000):
        qtbot.mouseClick(old_widget.regenerate_button, Qt.MouseButton.LeftButton)
    wait_until_idle(qtbot, window)
    user, reply = messages(window)
    assert user.content == "hello" and reply.info["reason"] in ("stop", "length")
    assert window.chat.view.message_widgets[-1] is not old_widget
    assert reply.info["cached_prompt_tokens"] > 0  # the engine reused the cached prompt
    assert len(window.store.messages(window.conversation.conversation.id)) == 2


def test_edit_a_message_and_resend(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=10)
    type_and_send(qtbot, window, "first question")
    wait_until_idle(qtbot, window)
    user_widget = window.chat.view.message_widgets[0]
    qtbot.mouseClick(user_widget.edit_button, Qt.MouseButton.LeftButton)
    user_widget.editor.setPlainText("second question")
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000):
        qtbot.mouseClick(user_widget.resend_button, Qt.MouseButton.LeftButton)
    wait_until_idle(qtbot, window)
    assert [m.content for m in messages(window)][0] == "second question"
    assert len(messages(window)) == 2


def test_restart_finds_the_conversation(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=12)
    type_and_send(qtbot, window, "remember me")
    wait_until_idle(qtbot, window)
    before = [(m.role, m.content) for m in messages(window)]
    window.close()

    again = start_app()
    assert [(m.role, m.content) for m in messages(again)] == before
    assert again.conversations.model.rowCount() == 1
    assert again.conversations.model.conversation_at(0).title == "remember me"
    assert len(again.chat.view.message_widgets) == 2


def test_new_chat_shortcut_and_switching_conversations(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=5)
    type_and_send(qtbot, window, "one")
    wait_until_idle(qtbot, window)
    first_id = window.conversation.conversation.id
    qtbot.keyClick(window, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
    assert window.conversation.conversation is None and window.chat.view.message_widgets == []
    type_and_send(qtbot, window, "two")
    wait_until_idle(qtbot, window)
    assert window.conversations.model.rowCount() == 2
    window.open_conversation(first_id)
    assert messages(window)[0].content == "one"


def test_a_streaming_reply_is_saved_as_it_grows(qtbot, start_app, monkeypatch):
    monkeypatch.setattr(generation_controller, "SAVE_INTERVAL_S", 0.0)
    window = start_app()
    use_greedy_sampling(window, max_tokens=450, system_prompt="")
    with qtbot.waitSignal(window.bridge.text_arrived, timeout=30_000):
        type_and_send(qtbot, window, "hi")
    saved = window.store.messages(window.conversation.conversation.id)
    assert window.generation.is_busy and saved[-1].role == "assistant" and saved[-1].content
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    wait_until_idle(qtbot, window)


def test_settings_survive_a_restart(qtbot, start_app, tiny_model):
    window = start_app(budget_bytes=None, theme=None)
    window.set_theme("dark")
    with qtbot.waitSignal(window.bridge.plan_changed, timeout=10_000):
        window.memory_panel.budget_slider.request(768 * 1024**2)
    window.close()

    again = start_app(model=None, budget_bytes=None, theme=None)
    assert again.theme.name == "dark"
    assert again.loader.request.model == tiny_model
    assert again.loader.engine.stats().plan.budget_bytes == 768 * 1024**2
    assert again.memory_panel.budget_slider.budget_bytes == 768 * 1024**2


def test_settings_are_saved_when_they_change_and_the_window_comes_back_where_it_was(qtbot, start_app):
    from app.settings import SettingsStore

    window = start_app()
    stored = lambda: SettingsStore(window.paths.settings_file).load()  # noqa: E731
    window.chat.settings_bar.max_tokens.setValue(77)
    assert stored().max_tokens == 77, "a crash would lose a change saved only on a clean close"
    window.resize(1111, 640)  # the offscreen screen is 800 px high; the width is clamped to it on restore
    qtbot.waitUntil(lambda: stored().window_geometry is not None, timeout=5_000)
    window.close()
    again = start_app()
    assert again.height() == 640 and again.width() < 1400  # not the first run's 1400 x 860
