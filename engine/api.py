"""The engine's public API: the only module app/ imports.

Engine owns one engine thread that owns torch, the model and the scheduler. Callers on any thread submit
requests and receive events through a per-request queue or a callback (called on the engine thread)."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

from engine.config import EngineOptions
from engine.errors import WispError
from engine.events import Event, FinishEvent, RequestStats, TokenEvent
from engine.model.loader import Progress
from engine.requests import GenerateRequest
from engine.runtime.builder import ModelInfo, build_engine
from engine.sampling import SamplingParams

__all__ = [
    "Engine", "EngineOptions", "GenerateRequest", "SamplingParams", "TokenEvent", "FinishEvent",
    "RequestStats", "ModelInfo", "RequestHandle", "WispError",
]

EventCallback = Callable[[Event], None]


class RequestHandle:
    """Events of one request, in order; iterate it (any thread) until the FinishEvent."""

    def __init__(self, request_id: str):
        self.request_id = request_id
        self.events: queue.Queue[Event] = queue.Queue()
        self.finish: FinishEvent | None = None

    def __iter__(self) -> Iterator[Event]:
        while self.finish is None:
            event = self.events.get()
            if isinstance(event, FinishEvent):
                self.finish = event
            yield event

    def result(self) -> FinishEvent:
        for _ in self:
            pass
        return self.finish


@dataclass
class _Submission:
    request: GenerateRequest
    handle: RequestHandle
    callback: EventCallback | None


class Engine:
    """A loaded model serving requests with continuous batching. Thread-safe; close() when done."""

    def __init__(self, options: EngineOptions, progress: Progress | None = None):
        """Loads the model on the calling thread (blocking); raises WispError with a readable message."""
        self.options = options
        self._core, self.info = build_engine(options, progress)
        self._inbox: queue.Queue = queue.Queue()
        self._handles: dict[str, tuple[RequestHandle, EventCallback | None]] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="wisp-engine", daemon=True)
        self._thread.start()

    def submit(self, request: GenerateRequest, callback: EventCallback | None = None) -> RequestHandle:
        """Queue a request. Errors in it arrive as a FinishEvent with reason "error" and a message."""
        if self._closed:
            raise WispError("the engine is closed")
        handle = RequestHandle(request.request_id)
        self._inbox.put(_Submission(request, handle, callback))
        return handle

    def submit_batch(self, requests: list[GenerateRequest]) -> list[RequestHandle]:
        """Queue several requests so that they are admitted together (same first step)."""
        if self._closed:
            raise WispError("the engine is closed")
        submissions = [_Submission(r, RequestHandle(r.request_id), None) for r in requests]
        self._inbox.put(submissions)
        return [s.handle for s in submissions]

    def generate(self, request: GenerateRequest) -> FinishEvent:
        """Blocking convenience: run one request to the end."""
        return self.submit(request).result()

    def cancel(self, request_id: str) -> None:
        """Stop a request after the current step; it finishes with reason "cancelled"."""
        self._inbox.put(("cancel", request_id))

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._inbox.put(None)
            self._thread.join(timeout=30)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- engine thread ---
    def _loop(self) -> None:
        while True:
            block = not self._core.has_work
            try:
                item = self._inbox.get(block=block)
            except queue.Empty:
                item = ...
            if item is None:
                return
            if item is not ...:
                self._take(item)
                continue  # drain the inbox before the next step
            self._emit(self._step())

    def _step(self) -> list[Event]:
        try:
            return self._core.step()
        except Exception as err:  # a failed step (out of memory, a bug) must not hang every caller
            return self._core.fail_all(f"generation failed: {type(err).__name__}: {err}")

    def _take(self, item) -> None:
        if isinstance(item, list):
            for submission in item:
                self._take(submission)
            return
        if isinstance(item, tuple):
            self._emit(self._core.cancel(item[1]))
            return
        request_id = item.request.request_id
        self._handles[request_id] = (item.handle, item.callback)
        try:
            self._core.add(item.request)
        except WispError as err:
            self._emit([_error_event(request_id, str(err))])

    def _emit(self, events: list[Event]) -> None:
        for event in events:
            handle, callback = self._handles[event.request_id]
            if isinstance(event, FinishEvent):
                del self._handles[event.request_id]
            handle.events.put(event)
            if callback is not None:
                callback(event)


def _error_event(request_id: str, message: str) -> FinishEvent:
    stats = RequestStats(0, 0, 0, 0.0, 0.0, 0.0, 0)
    return FinishEvent(request_id, "error", "", (), (), stats, error=message)


def expert_counters(engine: Engine):
    """A snapshot of the engine's cumulative expert counters (hits, misses, H2D bytes, ...)."""
    return engine._core.runner.model.experts.counters.snapshot()


def device_peak_bytes(engine: Engine) -> int | None:
    """Peak device memory allocated by this process on CUDA, None on the CPU."""
    import torch

    if engine._core.device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(engine._core.device)
