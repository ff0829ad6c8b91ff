"""Coding-assistant mode: its system prompt preset, files as context with a token count, raw code continuation."""

from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import QLabel

from app.chat.prompt_presets import load_presets
from tests.app.driving import messages, type_and_send, use_greedy_sampling, wait_until_idle


def switch_to_code_mode(qtbot, window):
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)
    assert window.chat.mode == "code"


def test_code_mode_uses_the_code_preset_and_attached_files(qtbot, start_app, tmp_path):
    window = start_app()
    switch_to_code_mode(qtbot, window)
    assert window.chat.settings_bar.settings().system_prompt == load_presets()["code-assistant"].prompt
    assert window.chat.code_context.isVisible() and window.chat.composer.continue_button.isVisible()
    project = tmp_path / "project"
    (project / "__pycache__").mkdir(parents=True)
    (project / "__pycache__" / "stack.cpython-311.pyc").write_bytes(b"\0binary")
    source = project / "stack.py"
    source.write_text("class Stack:\n    def push(self, item):\n        self.items.append(item)\n")
    with qtbot.waitSignal(window.chat.code_context.attachments_changed, timeout=10_000) as counted:
        window.chat.code_context.attach([project])
    assert counted.args[0] > 0 and "1 file(s)" in window.chat.code_context.summary_label.text()
    assert "≈" not in window.chat.code_context.summary_label.text()  # counted with the model's own tokenizer
    use_greedy_sampling(window, max_tokens=8, system_prompt="Be brief.")  # the preset and the file pass 512 tokens
    type_and_send(qtbot, window, "what does push do?")
    wait_until_idle(qtbot, window)
    question = messages(window)[0]
    assert question.content == "what does push do?", "the bubble shows the question, not the files pasted in"
    assert question.info["attachments"] == [str(source)]
    chips = window.chat.view.message_widgets[0].chips.findChildren(QLabel, "attachmentChip")
    assert len(chips) == 1 and chips[0].toolTip() == str(source) and chips[0].text().endswith(" stack.py")
    assert "attach.svg" in chips[0].text() and "📄" not in chips[0].text()  # the app's icon: an emoji may not render
    prompt = window.generation._chat_messages(messages(window)[:1])[-1]["content"]
    assert prompt.startswith(f"File `{source}`:\n```python\nclass Stack:") and prompt.endswith("what does push do?")
    assert window.chat.code_context.file_list.count() == 0
    assert window.store.get(window.conversation.conversation.id).mode == "code"
    assert window.settings.mode == "code"


def test_continue_this_code_sends_a_raw_completion(qtbot, start_app):
    window = start_app()
    switch_to_code_mode(qtbot, window)
    use_greedy_sampling(window, max_tokens=12)
    window.chat.composer.editor.setPlainText("def fib(n):")
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000) as finished:
        qtbot.mouseClick(window.chat.composer.continue_button, Qt.MouseButton.LeftButton)
    wait_until_idle(qtbot, window)
    code, continuation = messages(window)
    assert (code.kind, continuation.kind) == ("completion", "completion")
    assert continuation.content == finished.args[0].text
    assert continuation.info["prompt_tokens"] < 20  # the raw code only: no chat template, no system prompt

    widget = window.chat.view.message_widgets[-1]
    with qtbot.waitSignal(window.bridge.finished, timeout=30_000):
        widget.body.anchorClicked.emit(QUrl("wisp-code:continue/0"))
    wait_until_idle(qtbot, window)
    assert messages(window)[2].content == "def fib(n):" + continuation.content
