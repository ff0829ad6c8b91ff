"""The app's data when the disk will not take writes: a healthy database another program locks (or that is
read-only) opens read-only with a message saying so, and is never renamed as corrupt; only a file SQLite's
integrity check fails is moved aside. A full disk keeps the unsent message in the input box and says why."""

import os
import sqlite3
import sys

import pytest

from app.chat.conversation_store import ConversationStore, Message
from app.chat.store_opening import is_damaged, open_store
from tests.app.driving import error_dialogs, type_and_send, use_greedy_sampling, wait_for_error_dialog


def healthy_store(path) -> None:
    store = ConversationStore(path)
    conversation = store.create("kept", "chat", "")
    store.add_message(conversation.id, 0, Message("user", "hello"))
    store.close()


def test_a_locked_database_opens_read_only_and_is_not_moved(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    healthy_store(path)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    try:
        store, message = open_store(path)
        assert store.is_read_only and "read-only" in message
        assert not list(tmp_path.glob("*.corrupt-*")) and not is_damaged(tmp_path / "missing.sqlite3")
        with pytest.raises(sqlite3.Error):
            store.create("new", "chat", "")
    finally:
        locker.rollback()
        locker.close()
    assert [c.title for c in ConversationStore(path).conversations()] == ["kept"]


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="file modes bind only non-root users")
def test_a_read_only_folder_opens_read_only_with_the_conversations(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    healthy_store(folder / "conversations.sqlite3")
    os.chmod(folder / "conversations.sqlite3", 0o400)
    os.chmod(folder, 0o500)
    try:
        store, message = open_store(folder / "conversations.sqlite3")
        assert store.is_read_only and "read-only" in message
        assert [c.title for c in store.conversations()] == ["kept"]
    finally:
        os.chmod(folder, 0o700)
    assert not list(folder.glob("*.corrupt-*"))


def test_only_a_damaged_file_is_moved_aside(tmp_path):
    path = tmp_path / "conversations.sqlite3"
    healthy_store(path)
    assert not is_damaged(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\x13" * (4096 - 100)  # the schema page
    path.write_bytes(bytes(data))
    assert is_damaged(path)
    store, message = open_store(path)
    kept = [file for file in tmp_path.glob("*.corrupt-*") if not file.name.endswith(("-wal", "-shm"))]
    assert not store.is_read_only and "kept as" in message and len(kept) == 1


def test_a_full_disk_keeps_the_unsent_text_and_says_why(qtbot, start_app, monkeypatch):
    window = start_app()
    use_greedy_sampling(window, max_tokens=4)

    def full_disk(*args, **kwargs):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(window.store, "create", full_disk)
    type_and_send(qtbot, window, "please keep this")
    dialog = wait_for_error_dialog(qtbot, window)
    assert "disk is full" in dialog.text() and "still in the input box" in dialog.text()
    assert window.chat.composer.text() == "please keep this" and not window.generation.is_busy
    dialog.accept()
    monkeypatch.undo()
    type_and_send(qtbot, window, "please keep this")
    qtbot.waitUntil(lambda: len(window.store.conversations()) == 1, timeout=30_000)
    assert not error_dialogs(window)


def test_the_app_starts_on_a_locked_database_with_a_banner(qtbot, start_app, data_dir):
    data_dir.mkdir(parents=True)
    healthy_store(data_dir / "conversations.sqlite3")
    locker = sqlite3.connect(data_dir / "conversations.sqlite3", isolation_level=None)
    locker.execute("PRAGMA locking_mode=EXCLUSIVE")
    locker.execute("BEGIN EXCLUSIVE")
    try:
        window = start_app(is_ready_awaited=False)
        dialog = wait_for_error_dialog(qtbot, window)
        assert "read-only" in dialog.text() and window.store.is_read_only
    finally:
        locker.rollback()
        locker.close()
    assert not list(data_dir.glob("*.corrupt-*"))


def test_the_app_starts_when_its_log_folder_cannot_be_made(qtbot, start_app, data_dir):
    from app.crash_handler import CrashHandler

    data_dir.mkdir(parents=True)
    (data_dir / "logs").write_text("a file where the log folder would be")
    window = start_app()
    assert window.isVisible() and window.loader.engine is not None
    handler = CrashHandler(data_dir / "logs").install()
    handler.uninstall()
