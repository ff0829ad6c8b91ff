"""The status bar's context count is the tokens the next turn sends, of the serving model's context: it follows
a reply, a model switch (another context length and tokenizer), a deleted conversation and the system prompt."""

import re

from app.engine_api import api
from tests.app.driving import type_and_send, use_greedy_sampling, wait_until_idle

LOAD_TIMEOUT_MS = 60_000


def shown_context(window) -> tuple[int, int]:
    match = re.match(r"Context ([\d,]+) / ([\d,]+) tokens", window.status.context_label.text())
    assert match, window.status.context_label.text()
    return int(match[1].replace(",", "")), int(match[2].replace(",", ""))


def engine_count(window, system_prompt: str = "") -> int:
    """What the engine counts for the open conversation's next turn (its chat template and tokenizer)."""
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    chat = system + [{"role": m.role, "content": m.content} for m in window.conversation.messages]
    if not chat:
        return 0
    return window.loader.engine.count_prompt_tokens(api().GenerateRequest(messages=tuple(chat)))


def load(qtbot, window, model) -> None:
    engine = window.loader.engine
    window.load_model(model)
    qtbot.waitUntil(lambda: window.loader.engine not in (None, engine), timeout=LOAD_TIMEOUT_MS)


def test_the_context_count_follows_replies_models_and_deletes(qtbot, start_app):
    window = start_app()
    use_greedy_sampling(window, max_tokens=20, system_prompt="")
    type_and_send(qtbot, window, "hello there, how are you?")
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: window.status.context_label.text() != "", timeout=5000)
    assert shown_context(window) == (engine_count(window), 512)

    load(qtbot, window, None)  # the bundled demo: 2,048 tokens and its own tokenizer
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (engine_count(window), 2048), timeout=10_000)

    window.chat.settings_bar.set_system_prompt("")
    window.chat.settings_bar.prompt_edit.setPlainText("You are brief.")
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (engine_count(window, "You are brief."), 2048),
                    timeout=5000)

    window.conversations.delete_conversation(window.conversation.conversation.id)
    assert window.conversation.messages == []
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (engine_count(window, "You are brief."), 2048),
                    timeout=5000)
    window.chat.settings_bar.prompt_edit.setPlainText("")
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (0, 2048), timeout=5000)


def shown_context_or_none(window):
    try:
        return shown_context(window)
    except AssertionError:
        return None


def test_the_count_follows_the_mode_and_files_attached_before_sending(qtbot, start_app, tmp_path):
    window = start_app()
    use_greedy_sampling(window, max_tokens=4, system_prompt="")
    type_and_send(qtbot, window, "hello there")
    wait_until_idle(qtbot, window)
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (engine_count(window), 512), timeout=10_000)
    chat_count = shown_context(window)[0]
    window.chat.set_mode("code")  # the code assistant's own system prompt
    code_prompt = window.chat.settings_bar.settings().system_prompt
    qtbot.waitUntil(lambda: shown_context_or_none(window) == (engine_count(window, code_prompt), 512),
                    timeout=10_000)
    assert shown_context(window)[0] != chat_count
    before = shown_context(window)[0]
    source = tmp_path / "notes.py"
    source.write_text("def helper(value):\n    return value * 2\n" * 20)
    window.chat.code_context.attach([source])
    qtbot.waitUntil(lambda: (shown_context_or_none(window) or (0, 0))[0] > before + 100, timeout=10_000)
