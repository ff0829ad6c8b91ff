"""Run blocking work (imports, scans, model loads) off the GUI thread, Anki/napari style:

    run_in_background(lambda report: slow(report), on_success=..., on_failure=..., on_progress=...)

`fn(report)` runs on a worker QThread and must never touch a widget; `report(fraction, text)` may be called
from it. The callbacks run on the GUI thread: the worker's signals reach this module's QObject (which lives on
the GUI thread) through queued connections, and only that object calls them."""

from __future__ import annotations

import logging
from typing import Any, Callable

from PySide6.QtCore import QObject, QThread, Signal, Slot

log = logging.getLogger(__name__)
Report = Callable[[float, str], None]

_running: set["BackgroundTask"] = set()


class _WorkerThread(QThread):
    succeeded = Signal(object)
    failed = Signal(object)
    progressed = Signal(float, str)

    def __init__(self, fn: Callable[[Report], Any]):
        super().__init__()
        self._fn = fn

    def run(self) -> None:  # worker thread
        try:
            result = self._fn(self.progressed.emit)
        except BaseException as err:  # reported to the GUI thread, which decides what a user sees
            self.failed.emit(err)
        else:
            self.succeeded.emit(result)


class BackgroundTask(QObject):
    """One piece of background work; lives on the GUI thread and calls its callbacks there."""

    def __init__(self, fn: Callable[[Report], Any], on_success=None, on_failure=None, on_progress=None):
        super().__init__()
        self._on_success, self._on_failure, self._on_progress = on_success, on_failure, on_progress
        self._thread = _WorkerThread(fn)
        self._thread.succeeded.connect(self._on_thread_succeeded)
        self._thread.failed.connect(self._on_thread_failed)
        self._thread.progressed.connect(self._on_thread_progressed)
        self._thread.finished.connect(self._on_thread_finished)

    def start(self) -> "BackgroundTask":
        _running.add(self)
        self._thread.start()
        return self

    def wait(self, timeout_ms: int = 60_000) -> bool:
        return self._thread.wait(timeout_ms)

    @Slot(object)
    def _on_thread_succeeded(self, result) -> None:
        if self._on_success is not None:
            self._on_success(result)

    @Slot(object)
    def _on_thread_failed(self, error) -> None:
        if self._on_failure is None:
            log.error("background task failed", exc_info=error)
        else:
            self._on_failure(error)

    @Slot(float, str)
    def _on_thread_progressed(self, fraction: float, text: str) -> None:
        if self._on_progress is not None:
            self._on_progress(fraction, text)

    @Slot()
    def _on_thread_finished(self) -> None:
        _running.discard(self)


def run_in_background(fn: Callable[[Report], Any], on_success=None, on_failure=None, on_progress=None) -> BackgroundTask:
    return BackgroundTask(fn, on_success, on_failure, on_progress).start()


def wait_for_background_tasks(timeout_ms: int = 60_000) -> None:
    """Block until every running task's thread has ended (at shutdown, so no QThread outlives the app)."""
    for task in list(_running):
        task.wait(timeout_ms)
