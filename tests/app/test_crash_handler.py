"""Crash handling: an uncaught exception (GUI thread or any other) is logged and shown while the app keeps
running; a native crash leaves a faulthandler trace in the log folder."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QMessageBox

from app.crash_handler import CRASH_LOG, OBJECT_NAME, CrashHandler

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def crash_handler(qtbot, tmp_path):
    handler = CrashHandler(tmp_path / "logs").install()
    yield handler
    if handler.dialog is not None:
        handler.dialog.close()
    handler.uninstall()


def crash_dialog(qtbot, handler) -> QMessageBox:
    qtbot.waitUntil(lambda: handler.dialog is not None and handler.dialog.isVisible())
    assert handler.dialog.objectName() == OBJECT_NAME
    return handler.dialog


def test_an_uncaught_exception_is_written_to_the_log_and_shown(qtbot, crash_handler):
    try:
        raise ValueError("the bug")
    except ValueError:
        sys.excepthook(*sys.exc_info())
    dialog = crash_dialog(qtbot, crash_handler)
    assert "ValueError: the bug" in dialog.text()
    assert "Traceback" in dialog.detailedText() and "test_crash_handler.py" in dialog.detailedText()
    assert "ValueError: the bug" in (crash_handler.log_dir / CRASH_LOG).read_text()


def test_an_exception_in_a_qt_slot_is_shown_and_the_event_loop_goes_on(qtbot, crash_handler):
    def broken_slot():
        raise KeyError("missing")

    QTimer.singleShot(0, broken_slot)
    assert "KeyError: 'missing'" in crash_dialog(qtbot, crash_handler).text()
    with qtbot.waitSignal(crash_handler.crashed, timeout=5_000):
        QTimer.singleShot(0, broken_slot)  # a second error joins the open dialog
    assert crash_handler.dialog.detailedText().count("KeyError: 'missing'") == 2


def test_an_exception_on_another_thread_is_shown_on_the_gui_thread(qtbot, crash_handler):
    def fail():
        raise RuntimeError("worker failed")

    worker = threading.Thread(target=fail)
    worker.start()
    worker.join()
    assert "RuntimeError: worker failed" in crash_dialog(qtbot, crash_handler).text()


def test_a_native_crash_leaves_a_trace_in_the_log_folder(tmp_path):
    code = ("import faulthandler; from pathlib import Path; from app.crash_handler import CrashHandler; "
            f"CrashHandler(Path({str(tmp_path)!r})).install(); faulthandler._sigsegv()")
    crash = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert crash.returncode != 0
    assert "Segmentation fault" in (tmp_path / CRASH_LOG).read_text()


def test_a_fatal_python_error_and_stderr_land_in_the_crash_log(tmp_path):
    code = ("import ctypes, sys; from pathlib import Path; from app.crash_handler import CrashHandler; "
            f"CrashHandler(Path({str(tmp_path)!r})).install(capture_stderr=True); "
            "print('a warning on stderr', file=sys.stderr, flush=True); "
            "ctypes.pythonapi.Py_FatalError(b'none_dealloc: simulated')")
    crash = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert crash.returncode != 0
    text = (tmp_path / CRASH_LOG).read_text()
    assert "wisp-desktop started" in text and "a warning on stderr" in text
    assert "Fatal Python error" in text and "none_dealloc: simulated" in text
