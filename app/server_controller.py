"""Serve the loaded engine over the OpenAI-compatible API (engine.api.start_server) for editors and other tools on
this computer. Loopback only, so no API key is needed and nothing else on the network can reach it.

Starting and stopping run off the GUI thread. The running server is taken under a lock by whoever stops it: the
GUI (the toggle), or the model loader's worker just before it closes the engine (see release)."""

from __future__ import annotations

import logging
import threading
from typing import Callable

from PySide6.QtCore import QObject, Signal

from app.background import run_in_background
from app.engine_api import api

log = logging.getLogger(__name__)
HOST = "127.0.0.1"


def user_message(error: BaseException) -> str:
    if isinstance(error, api().WispError):
        return str(error)
    log.error("the API server failed", exc_info=error)
    return f"{type(error).__name__}: {error} (details in the log file)"


class ServerController(QObject):
    started = Signal(str)  # the base URL clients use (ends in /v1)
    stopped = Signal()  # also emitted after release() stopped it for a model change
    failed = Signal(str)  # a message a user can act on

    def __init__(self, engine_source: Callable[[], object], parent: QObject | None = None):
        super().__init__(parent)
        self._engine_source = engine_source
        self._lock = threading.Lock()
        self._handle = None  # engine.api.start_server's handle, guarded by _lock
        self._served_engine = None
        self._is_starting = False

    @property
    def url(self) -> str | None:
        with self._lock:
            return None if self._handle is None else self._handle.url

    @property
    def is_serving(self) -> bool:
        return self.url is not None

    @property
    def is_starting(self) -> bool:
        return self._is_starting

    def start(self, port: int) -> bool:
        """Serve the loaded engine on loopback at `port` (0: any free port); False if there is nothing to do."""
        engine = self._engine_source()
        if engine is None or self._is_starting or self.is_serving:
            return False
        self._is_starting = True
        run_in_background(lambda report: api().start_server(engine, HOST, port),
                          on_success=lambda handle: self._on_start_task_succeeded(handle, engine),
                          on_failure=self._on_start_task_failed)
        return True

    def stop(self) -> None:
        handle = self._take(lambda engine: True)
        if handle is not None:
            run_in_background(lambda report: handle.stop(), on_success=lambda _: self.stopped.emit(),
                              on_failure=self._on_stop_task_failed)

    def release(self, engine) -> None:
        """Worker thread (a ModelLoader release hook): stop serving `engine` before it is closed; blocks."""
        handle = self._take(lambda served: served is engine)
        if handle is not None:
            handle.stop()
            self.stopped.emit()  # queued to the GUI thread

    def _take(self, is_wanted: Callable[[object], bool]):
        """Any thread: remove and return the running server's handle if `is_wanted(its engine)`."""
        with self._lock:
            if self._handle is None or not is_wanted(self._served_engine):
                return None
            handle, self._handle, self._served_engine = self._handle, None, None
            return handle

    def _on_start_task_succeeded(self, handle, engine) -> None:
        self._is_starting = False
        if engine is not self._engine_source():  # the model changed while the server started
            run_in_background(lambda report: handle.stop(), on_success=lambda _: self.stopped.emit())
            return
        with self._lock:
            self._handle, self._served_engine = handle, engine
        log.info("serving %s at %s", engine.info.name, handle.url)
        self.started.emit(handle.url)

    def _on_start_task_failed(self, error: BaseException) -> None:
        self._is_starting = False
        self.failed.emit(user_message(error))

    def _on_stop_task_failed(self, error: BaseException) -> None:
        log.error("stopping the API server failed", exc_info=error)
        self.stopped.emit()
