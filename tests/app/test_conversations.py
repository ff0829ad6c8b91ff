"""The conversation list: rename, delete, export; the store keeps everything across restarts."""

import json

from app.chat.conversation_store import ConversationStore, Message
from app.chat.export import to_json, to_markdown
from tests.app.driving import messages, type_and_send, use_greedy_sampling, wait_until_idle


def test_rename_delete_and_export_from_the_list(qtbot, start_app, tmp_path):
    window = start_app()
    use_greedy_sampling(window, max_tokens=6)
    type_and_send(qtbot, window, "a question")
    wait_until_idle(qtbot, window)
    conversation_id = window.conversation.conversation.id
    model = window.conversations.model
    assert model.setData(model.index(0), "Renamed")
    assert window.store.get(conversation_id).title == "Renamed"

    window.conversations.export_conversation(conversation_id, tmp_path / "chat.md", "markdown")
    window.conversations.export_conversation(conversation_id, tmp_path / "chat.json", "json")
    assert (tmp_path / "chat.md").read_text().startswith("# Renamed")
    exported = json.loads((tmp_path / "chat.json").read_text())
    assert [m["content"] for m in exported["messages"]][0] == "a question"

    window.conversations.delete_conversation(conversation_id)
    assert model.rowCount() == 0 and window.store.get(conversation_id) is None
    assert window.conversation.conversation is None and messages(window) == []


def test_store_round_trip_and_truncate(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    conversation = store.create("t", "chat", "be brief")
    for position, text in enumerate(["q1", "a1", "q2", "a2"]):
        store.add_message(conversation.id, position, Message("user" if position % 2 == 0 else "assistant", text))
    store.delete_messages_from(conversation.id, 2)
    store.close()
    reopened = ConversationStore(tmp_path / "c.sqlite3")
    assert [m.content for m in reopened.messages(conversation.id)] == ["q1", "a1"]
    assert reopened.get(conversation.id).system_prompt == "be brief"


def test_ids_are_never_reused_after_the_newest_conversation_is_deleted(tmp_path):
    store = ConversationStore(tmp_path / "chats.sqlite3")
    first, newest = store.create("a", "chat", ""), store.create("b", "chat", "")
    store.delete(newest.id)
    assert store.create("c", "chat", "").id == newest.id + 1
    store.close()
    reopened = ConversationStore(tmp_path / "chats.sqlite3")
    reopened.delete(newest.id + 1)
    assert reopened.create("d", "chat", "").id == newest.id + 2 and reopened.get(first.id).title == "a"


def test_exports_show_code_continuations_as_code(tmp_path):
    store = ConversationStore(tmp_path / "c.sqlite3")
    conversation = store.create("code", "code", "")
    store.add_message(conversation.id, 0, Message("user", "def f():", kind="completion"))
    markdown = to_markdown(conversation, store.messages(conversation.id))
    assert "```\ndef f():\n```" in markdown
    assert json.loads(to_json(conversation, store.messages(conversation.id)))["messages"][0]["kind"] == "completion"


def test_a_corrupt_database_is_kept_aside_and_the_app_starts_empty(qtbot, start_app, data_dir):
    from tests.app.driving import wait_for_error_dialog

    data_dir.mkdir(parents=True)
    (data_dir / "conversations.sqlite3").write_bytes(b"SQLite format 3\x00" + b"\x13" * 4000)
    window = start_app()
    dialog = wait_for_error_dialog(qtbot, window)
    kept = list(data_dir.glob("conversations.sqlite3.corrupt-*"))
    assert len(kept) == 1 and str(kept[0]) in dialog.text()
    assert kept[0].read_bytes().startswith(b"SQLite format 3")
    assert window.store.conversations() == []
    dialog.accept()
    use_greedy_sampling(window, max_tokens=4)
    type_and_send(qtbot, window, "a fresh start")
    wait_until_idle(qtbot, window)
    assert len(window.store.conversations()) == 1


def test_the_database_and_its_folder_are_owner_only(qtbot, start_app, data_dir):
    window = start_app()
    use_greedy_sampling(window, max_tokens=4)
    type_and_send(qtbot, window, "private")
    wait_until_idle(qtbot, window)
    database = window.paths.database
    assert database.stat().st_mode & 0o777 == 0o600
    assert database.parent.stat().st_mode & 0o777 == 0o700
    for journal in database.parent.glob("conversations.sqlite3-*"):
        assert journal.stat().st_mode & 0o077 == 0, journal
