"""Carry engine-thread callbacks to the GUI thread.

`on_event` and `on_plan` run ON THE ENGINE THREAD: they only append to a locked buffer and, when the buffer
was empty, emit a queued wake-up. The GUI thread then waits one batching interval and drains the buffer, so
token text reaches widgets at most ~40 times a second however fast the model is, and events keep their order
(a request's text always arrives before its FinishEvent)."""

from __future__ import annotations

import threading

from PySide6.QtCore import QObject, Qt, QTimer, Signal, Slot

from app.engine_api import api

BATCH_INTERVAL_MS = 25


class EngineBridge(QObject):
    text_arrived = Signal(str, str)  # request_id, the answer text generated since the last batch
    reasoning_arrived = Signal(str, str)  # request_id, a reasoning model's reasoning since the last batch
    finished = Signal(object)  # engine.api.FinishEvent
    plan_changed = Signal(object)  # engine.api.PlanEvent
    _wake = Signal()

    def __init__(self, parent: QObject | None = None, interval_ms: int = BATCH_INTERVAL_MS):
        super().__init__(parent)
        self._lock = threading.Lock()
        self._pending: list = []
        self._timer = QTimer(self, singleShot=True, interval=interval_ms)
        self._timer.timeout.connect(self._on_timer_timeout)
        self._wake.connect(self._on_bridge_wake, Qt.ConnectionType.QueuedConnection)

    def on_event(self, event) -> None:
        """Engine thread: a TokenEvent or FinishEvent of a request submitted with this callback."""
        self._put(event)

    def on_plan(self, event) -> None:
        """Engine thread: a PlanEvent from Engine.add_plan_listener."""
        self._put(event)

    def _put(self, event) -> None:
        with self._lock:
            was_empty = not self._pending
            self._pending.append(event)
        if was_empty:
            self._wake.emit()

    @Slot()
    def _on_bridge_wake(self) -> None:
        if not self._timer.isActive():
            self._timer.start()

    @Slot()
    def _on_timer_timeout(self) -> None:
        self.flush()

    def flush(self) -> None:
        """GUI thread: deliver everything buffered, joining consecutive token texts (and reasonings) of one request."""
        with self._lock:
            events, self._pending = self._pending, []
        engine = api()
        run: list = []  # consecutive TokenEvents of one request
        for event in events:
            is_token = isinstance(event, engine.TokenEvent)
            if is_token and run and event.request_id == run[0].request_id:
                run.append(event)
                continue
            self._emit_run(run)
            run = [event] if is_token else []
            if isinstance(event, engine.FinishEvent):
                self.finished.emit(event)
            elif isinstance(event, engine.PlanEvent):
                self.plan_changed.emit(event)
        self._emit_run(run)

    def _emit_run(self, run: list) -> None:
        if not run:
            return
        reasoning = "".join(event.reasoning for event in run)
        text = "".join(event.text for event in run)
        if reasoning:
            self.reasoning_arrived.emit(run[0].request_id, reasoning)
        if text:
            self.text_arrived.emit(run[0].request_id, text)
