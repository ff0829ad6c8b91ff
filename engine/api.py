"""The engine's public API: the only module app/ imports.

Engine owns one engine thread that owns torch, the model and the scheduler. Callers on any thread submit
requests and receive events through a per-request queue or a callback (called on the engine thread)."""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

from engine.alloc.memory_plan import MemoryPlan
from engine.loading.catalog import ModelEntry, budget_marks, engine_plan, fit_summary, scan_models
from engine.config import EngineOptions, Progress
from engine.errors import BudgetError, WispError
from engine.expert_modes import ExpertMode
from engine.events import EngineStats, ErrorKind, Event, FinishEvent, RequestStats, TokenEvent
from engine.system.hardware_info import HardwareInfo
from engine.loading.plan import BudgetMarks, LoadPlan, plan_for
from engine.loading.source import ModelSource, SourceKind, open_source
from engine.loading.model_path import is_remote_url
from engine.generation.model_info import ModelInfo
from engine.generation.plan_event import PlanEvent
from engine.request_checks import REASONING_EFFORTS
from engine.requests import GenerateRequest
from engine.sampling import SamplingParams
from engine.sampling_checks import MAX_TEMPERATURE
from engine.units import format_bytes, parse_size
from engine.vision.image_input import MAX_IMAGE_BYTES, MAX_IMAGES, MAX_MEGAPIXELS, check_images

__all__ = [
    "Engine", "EngineOptions", "GenerateRequest", "SamplingParams", "TokenEvent", "FinishEvent", "RequestStats",
    "ModelInfo", "RequestHandle", "EngineStats", "PlanEvent", "MemoryPlan", "WispError", "BudgetError",
    "ModelEntry", "scan_models", "fit_summary", "engine_plan", "budget_marks", "BudgetMarks",
    "ModelSource", "SourceKind", "open_source", "plan_for", "LoadPlan",
    "HardwareInfo", "detect_hardware", "parse_size", "format_bytes", "start_server", "is_remote_url",
    "REASONING_EFFORTS", "MAX_TEMPERATURE", "ExpertMode", "ErrorKind",
    "MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_MEGAPIXELS", "check_images",  # images: docs/images.md
]

EventCallback = Callable[[Event], None]
STATS_PERIOD_S = 0.1  # how stale Engine.stats() may get while generating (the app's live charts poll it)
PlanListener = Callable[[PlanEvent], None]
HANDLE_POLL_S = 0.5  # how often a waiting RequestHandle checks that the engine thread still runs
UNLIMITED_CONTEXT = 2**62  # counting a prompt checks no context length


class RequestHandle:
    """Events of one request, in order; iterate it (any thread) until the FinishEvent. If the engine thread
    is gone (`is_serving()` turns false) the iteration ends with an error FinishEvent instead of waiting."""

    def __init__(self, request_id: str, is_serving: Callable[[], bool] = lambda: True):
        self.request_id = request_id
        self.events: queue.Queue[Event] = queue.Queue()
        self.finish: FinishEvent | None = None
        self._is_serving = is_serving

    def __iter__(self) -> Iterator[Event]:
        while self.finish is None:
            event = self._next_event()
            if isinstance(event, FinishEvent):
                self.finish = event
            yield event

    def _next_event(self) -> Event:
        while True:
            try:
                return self.events.get(timeout=HANDLE_POLL_S)
            except queue.Empty:
                if not self._is_serving() and self.events.empty():
                    return _error_event(self.request_id, "the engine stopped before this request finished")

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
        from engine.launch import build_engine  # torch and the backends: imported when a model loads

        self.options = options
        self._core, self.info = build_engine(options, progress)
        self._inbox: queue.Queue = queue.Queue()
        self._handles: dict[str, tuple[RequestHandle, EventCallback | None]] = {}
        self._plan_listeners: list[PlanListener] = []
        self._stats = self._core.stats()
        self._stats_time = time.monotonic()
        self._closed = False
        self._unadmitted: set[str] = set()  # submitted, not yet admitted by the engine thread
        self._cancelled_early: set[str] = set()  # cancelled before their admission
        self._tokenizing = ThreadPoolExecutor(1, thread_name_prefix="wisp-tokenize")  # one thread: keeps the order
        self._thread = threading.Thread(target=self._loop, name="wisp-engine", daemon=True)
        self._thread.start()

    # --- any thread ---
    def submit(self, request: GenerateRequest, callback: EventCallback | None = None) -> RequestHandle:
        """Queue a request. Errors in it arrive as a FinishEvent with reason "error" and a message.
        `callback`, if given, is called on the engine thread for each event (keep it quick)."""
        return self.submit_batch([request], callback)[0]

    def submit_batch(self, requests: list[GenerateRequest], callback: EventCallback | None = None) -> list[RequestHandle]:
        """Queue several requests so that they are admitted together (same first step)."""
        if self._closed:
            raise WispError("the engine is closed")
        submissions = [_Submission(r, RequestHandle(r.request_id, self._thread.is_alive), callback) for r in requests]
        self._unadmitted.update(r.request_id for r in requests)
        self._tokenizing.submit(self._prepare, submissions)
        return [s.handle for s in submissions]

    @property
    def sees_images(self) -> bool:
        """Whether the model takes images: {"type": "image", "image": bytes} parts in a message's content (a
        vision tower was loaded with it). A request with images to a model that does not fails with a RequestError
        "this model does not take images (<model_type>)"."""
        return getattr(getattr(self._core, "runner", None), "vision", None) is not None

    def generate(self, request: GenerateRequest) -> FinishEvent:
        """Blocking convenience: run one request to the end."""
        return self.submit(request).result()

    def cancel(self, request_id: str) -> None:
        """Stop a request after the current step (or before it is admitted); it finishes with reason "cancelled"."""
        self._inbox.put(("cancel", request_id))

    def count_prompt_tokens(self, request: GenerateRequest) -> int | None:
        """How many tokens `request`'s prompt has on this model (chat template applied, context length not
        checked), or None where the tokenizer is not here (a remote server). Any thread: it runs on the engine
        thread between two steps, so it waits for the step in progress."""
        from engine.generation.prompt import prompt_token_ids

        tokenizer = self.tokenizer
        if tokenizer is None:
            return None
        return self._on_engine_thread(lambda: len(prompt_token_ids(request, tokenizer, UNLIMITED_CONTEXT)))

    @property
    def has_draft_layers(self) -> bool:
        """The loaded model's checkpoint holds a multi-token-prediction layer Wisp drafts from (--speculative mtp;
        auto takes it). Any thread."""
        return getattr(self.info, "has_draft_layers", False)

    @property
    def tokenizer(self):
        """The loaded model's tokenizer (engine.text.tokenizer.Tokenizer, or a GGUF file's), None for a remote server.
        Any thread: encoding and decoding keep no state between calls."""
        return getattr(self._core, "tokenizer", None)

    def expert_counters(self):
        """A snapshot of the cumulative expert counters (hits, misses, H2D bytes, ...); zeros for backends without
        an expert pager (llama.cpp, remote). Any thread: read on the engine thread, where counters of graphed
        decode steps are settled from device buffers."""
        return self._on_engine_thread(self._core.expert_counters)

    def device_peak_bytes(self) -> int | None:
        """Peak device memory allocated by this process on CUDA, None on the CPU or a remote server."""
        device = getattr(self._core, "device", None)
        if device is None or device.type != "cuda":
            return None
        import torch

        return torch.cuda.max_memory_allocated(device)

    def set_budget(self, budget_bytes: int | None) -> None:
        """Re-plan device memory for a new budget at the next drained barrier (nothing running).
        The outcome arrives as a PlanEvent at the plan listeners (error set if the budget was refused)."""
        self._inbox.put(("budget", budget_bytes))

    def add_plan_listener(self, listener: PlanListener) -> None:
        """`listener(PlanEvent)` is called on the engine thread whenever the memory split changes."""
        self._plan_listeners.append(listener)

    def stats(self) -> EngineStats:
        """The latest snapshot (updated by the engine thread every STATS_PERIOD_S while generating and when it
        drains); cheap, any thread."""
        return self._stats

    @property
    def plan(self) -> MemoryPlan:
        return self._stats.plan

    def _on_engine_thread(self, fn):
        """Run fn() between two steps on the engine thread (which owns torch and the device) and return its result."""
        if self._closed or threading.current_thread() is self._thread or not self._thread.is_alive():
            return fn()
        done: Future = Future()
        self._inbox.put(("call", fn, done))
        return done.result()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._tokenizing.shutdown(wait=False, cancel_futures=True)
            self._inbox.put(None)
            self._thread.join(timeout=30)

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- tokenizer thread ---
    def _prepare(self, submissions: list[_Submission]) -> None:
        """Tokenise the prompts here, off the engine thread, for cores whose tokenizer any thread may use (a
        megabyte prompt takes seconds, and every stream would wait for it); then queue them for admission."""
        tokenize_ahead = getattr(self._core, "tokenize_ahead", None)
        for submission in submissions if tokenize_ahead else ():
            tokenize_ahead(submission.request)
        self._inbox.put(submissions)

    # --- engine thread ---
    def _loop(self) -> None:
        while True:
            try:
                item = self._inbox.get(block=not self._core.has_work)
            except queue.Empty:
                item = ...
            if item is None:
                self._core.close()
                return
            try:
                self._turn(item)
            except Exception as err:  # a bug outside a step (stats, a barrier) must not hang every caller
                self._emit(self._core.fail_all(f"engine error: {type(err).__name__}: {err}"))

    def _turn(self, item) -> None:
        if item is not ...:
            self._take(item)
            return  # drain the inbox before the next step
        self._announce(self._core.memory.admission_barrier())  # before a burst is admitted: KV for all of it
        self._emit(self._step())
        drained = not self._core.has_work
        if drained:
            self._core.throughput.idle()
            self._announce(self._core.memory.at_barrier())
        now = time.monotonic()
        if drained or now - self._stats_time >= STATS_PERIOD_S:  # settling counters reads the device
            self._stats, self._stats_time = self._core.stats(), now

    def _step(self) -> list[Event]:
        try:
            return self._core.step()
        except Exception as err:  # a failed step (out of memory, a bug) must not hang every caller
            return self._core.fail_all(f"generation failed: {type(err).__name__}: {err}")

    def _take(self, item) -> None:
        if isinstance(item, list):
            for submission in item:
                self._admit(submission)
        elif item[0] == "cancel":
            if item[1] in self._unadmitted:
                self._cancelled_early.add(item[1])
            self._emit(self._core.cancel(item[1]))
            if not self._core.has_work:  # a cancel can drain the engine: idle, and a barrier too
                self._core.throughput.idle()
                self._announce(self._core.memory.at_barrier())
        elif item[0] == "budget":
            self._announce(self._core.memory.request_budget(item[1]))
        elif item[0] == "call":
            _, fn, done = item
            try:
                done.set_result(fn())
            except Exception as err:  # noqa: BLE001 - handed to the caller's thread
                done.set_exception(err)
            return
        self._stats = self._core.stats()

    def _admit(self, submission: _Submission) -> None:
        """Queue one request; anything that goes wrong while tokenising or seeding it fails it alone."""
        request_id = submission.request.request_id
        self._handles[request_id] = (submission.handle, submission.callback)
        self._unadmitted.discard(request_id)
        if request_id in self._cancelled_early:
            self._cancelled_early.discard(request_id)
            self._core.cancel(request_id)  # nothing runs; the core drops what it prepared for it
            self._emit([_finish_event(request_id, "cancelled")])
            return
        try:
            self._core.add(submission.request)
        except WispError as err:
            self._emit([_error_event(request_id, str(err))])
        except Exception as err:  # noqa: BLE001 - a tokenizer or generator refusing this request's values
            self._emit([_error_event(request_id, f"the request was refused: {type(err).__name__}: {err}")])

    def _emit(self, events: list[Event]) -> None:
        for event in events:
            handle, callback = self._handles[event.request_id]
            if isinstance(event, FinishEvent):
                del self._handles[event.request_id]
            handle.events.put(event)
            if callback is not None:
                callback(event)

    def _announce(self, events: list[PlanEvent]) -> None:
        for event in events:
            for listener in self._plan_listeners:
                listener(event)


def _error_event(request_id: str, message: str) -> FinishEvent:
    return _finish_event(request_id, "error", message)


def _finish_event(request_id: str, reason: str, error: str | None = None) -> FinishEvent:
    stats = RequestStats(0, 0, 0, 0.0, 0.0, 0.0, 0)
    return FinishEvent(request_id, reason, "", (), (), stats, error=error,
                       error_kind=ErrorKind.REFUSED if error is not None else None)


def detect_hardware() -> HardwareInfo:
    """What this machine has: torch, CUDA, GPUs and their memory, host RAM (imports torch)."""
    from engine.system.hardware import detect

    return detect()


def start_server(engine: Engine, host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None):
    """Serve a loaded engine over an OpenAI-compatible HTTP API in a background thread; returns a handle with
    `.url` and `.stop()` (call stop() off the GUI thread, before engine.close()). Raises WispError for a busy
    port or a non-loopback host without an API key. Needs the `server` extra."""
    try:
        from engine.server import start_server as start
    except ImportError:
        raise WispError("serving needs the server extra: pip install 'wisp[server]'") from None
    return start(engine, host, port, api_key)

