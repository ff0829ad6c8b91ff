"""Logs, the crash log and `wisp chat`'s history hold what users typed: their folders are 0700 and the files
0600 whatever the umask, rotated logs included, and files left readable by an older version are narrowed."""

import logging
import os
import stat
import sys

import pytest

from app.app_paths import AppPaths
from app.crash_handler import CrashHandler
from app.logs import setup_logging
from engine.cli.chat_input import private_history_file, prompt_session

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file modes")


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def test_the_app_log_and_its_rotations_are_owner_only(tmp_path, open_umask):
    paths = AppPaths.resolve(tmp_path / "data").create()
    setup_logging(paths.log_file)
    try:
        for _ in range(3000):  # past the 1 MiB rotation
            logging.getLogger("wisp.test").warning("x" * 500)
        files = sorted(paths.log_dir.iterdir())
        assert len(files) >= 2 and mode(paths.log_dir) == 0o700
        assert all(mode(file) == 0o600 for file in files)
    finally:
        setup_logging(tmp_path / "elsewhere" / "log.txt")


def test_an_old_readable_log_is_narrowed(tmp_path, open_umask):
    log_dir = tmp_path / "logs"
    log_dir.mkdir(mode=0o755)
    (log_dir / "wisp-desktop.log").write_text("old\n")
    os.chmod(log_dir / "wisp-desktop.log", 0o644)
    setup_logging(log_dir / "wisp-desktop.log")
    setup_logging(tmp_path / "elsewhere" / "log.txt")
    assert mode(log_dir) == 0o700 and mode(log_dir / "wisp-desktop.log") == 0o600


def test_the_crash_log_is_owner_only(qtbot, tmp_path, open_umask):
    handler = CrashHandler(tmp_path / "logs").install()
    try:
        handler.report(ValueError, ValueError("secret"), None)
        qtbot.waitUntil(lambda: handler.dialog is not None)
        handler.dialog.close()
    finally:
        handler.uninstall()
    assert mode(tmp_path / "logs") == 0o700 and mode(handler.crash_log) == 0o600


def test_the_chat_history_is_owner_only(tmp_path, open_umask, monkeypatch):
    old = tmp_path / "state" / "wisp" / "chat_history"
    old.parent.mkdir(parents=True, mode=0o755)
    old.write_text("+old message\n")
    os.chmod(old, 0o644)
    assert private_history_file(old) == old and mode(old) == 0o600 and mode(old.parent) == 0o700
    fresh = tmp_path / "new" / "wisp" / "chat_history"
    private_history_file(fresh)
    assert mode(fresh) == 0o600 and mode(fresh.parent) == 0o700


def test_the_chat_prompt_writes_its_history_owner_only(tmp_path, open_umask, monkeypatch):
    pytest.importorskip("prompt_toolkit")
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with create_pipe_input() as pipe:
        pipe.send_text("hello there\r")
        assert prompt_session(input=pipe, output=DummyOutput()).prompt("> ") == "hello there"
    history = tmp_path / "state" / "wisp" / "chat_history"
    assert "hello there" in history.read_text() and mode(history) == 0o600
