"""Owns the loaded Engine and replaces it on a background thread.

A new model is checked first (catalog entry and memory plan, both cheap) so that a broken folder or a budget
that is too small is refused while the current model keeps running. Only then is the current engine closed
(its device memory must be free for the new one) and the new one loaded; if that load fails, the previous model
is loaded again so that the app stays usable. A remote server holds no local memory, so it is connected before
the current model is closed: a dead URL leaves the current model serving.

Release hooks (e.g. the app's API server) run just before an engine is closed, so that nothing uses it then."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal

from app.background import run_in_background
from app.engine_api import ExpertMode, api
from engine.api import is_remote_url

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadRequest:
    model: str | None  # None: the bundled demo model
    budget_bytes: int | None
    device: str = "auto"
    api_key: str | None = field(default=None, repr=False)  # remote servers only
    deterministic: bool = True  # CUDA: bitwise-repeatable kernels (the app's "Repeatable outputs")
    gguf_engine: str = "auto"  # EngineOptions.backend for a .gguf file (the app's Model → GGUF engine)
    host_budget_bytes: int | None = None  # most host RAM for experts (the settings' host_budget_bytes)
    dense_quant: str | None = None  # EngineOptions.dense_quant for a checkpoint (the app's Q8_0 dense weights)
    speculative: str = "off"  # EngineOptions.speculative (app.speculation_choice.load_mode of Model → Draft tokens)

    @property
    def is_remote(self) -> bool:
        return is_remote_url(self.model)

    @property
    def is_gguf(self) -> bool:
        return self.model is not None and not self.is_remote and Path(self.model).suffix.lower() == ".gguf"

    def options(self):
        if self.is_remote:
            return api().EngineOptions(model=self.model, api_key=self.api_key)
        # The choice is about GGUF files only: the engine refuses llama.cpp for a checkpoint folder.
        # Q8_0 dense weights are about checkpoints: the engine refuses them for a GGUF file (it keeps its types).
        backend = self.gguf_engine if self.is_gguf else "auto"
        return api().EngineOptions(model=self.model, device=self.device, experts=ExpertMode.PAGED, backend=backend,
                                   budget_bytes=self.budget_bytes, deterministic=self.deterministic,
                                   host_budget_bytes=self.host_budget_bytes,
                                   dense_quant=None if self.is_gguf else self.dense_quant,
                                   speculative=self.speculative)

    @property
    def display_name(self) -> str:
        if self.is_remote:
            return self.model
        return "the demo model" if self.model is None else Path(self.model).name


class _RefusedBeforeUnload(Exception):
    """The new model was refused by the checks; the current engine was not touched."""


def user_message(error: BaseException) -> str:
    if isinstance(error, _RefusedBeforeUnload):
        error = error.__cause__ or error
    if isinstance(error, api().WispError):
        return str(error)
    log.error("model load failed", exc_info=error)
    return f"loading failed: {type(error).__name__}: {error} (details in the log file)"


def check_before_unload(request: LoadRequest) -> None:
    """Worker thread: raise _RefusedBeforeUnload if the model cannot be used at this budget."""
    if request.is_remote:
        return
    engine_api = api()
    try:
        if request.model is None:  # the bundled demo is checked as any folder is
            engine_api.engine_plan(request.options())
            return
        path = Path(request.model).expanduser().resolve()
        entries = [e for e in engine_api.scan_models([str(path)]) if Path(e.path) == path]
        if entries and entries[0].error:
            raise engine_api.WispError(entries[0].error)
        if path.is_dir() and (path / "config.json").exists():
            engine_api.engine_plan(request.options())
        elif request.is_gguf:
            check_gguf_plan(request)
    except engine_api.WispError as err:
        raise _RefusedBeforeUnload() from err


def check_gguf_plan(request: LoadRequest) -> None:
    """Raise the engine's BudgetError for a GGUF file Wisp's engine would run at a budget too small, or its
    UnsupportedModelError when Wisp's engine was asked for a file it cannot run. A file that the choice sends to
    llama.cpp has no Wisp plan (also UnsupportedModelError): llama.cpp places it itself, so it passes."""
    engine_api = api()
    try:
        engine_api.engine_plan(request.options())
    except engine_api.BudgetError:
        raise
    except engine_api.WispError:
        if request.gguf_engine == "wisp":
            raise


def connect_before_unload(request: LoadRequest, report):
    """Worker thread: the remote engine, or _RefusedBeforeUnload (the current engine was not touched)."""
    try:
        return api().Engine(request.options(), progress=report)
    except Exception as err:
        raise _RefusedBeforeUnload() from err


def minimum_budget(request: LoadRequest) -> int | None:
    """The engine planner's minimum budget for a local model Wisp's engine runs (None when it cannot say)."""
    try:
        return api().budget_marks(request.options()).minimum
    except Exception:
        return None


def budget_marks(request: LoadRequest):
    """engine.api.BudgetMarks of a local model Wisp's engine runs (a checkpoint, or a GGUF file it pages), or None
    (remote, a GGUF on llama.cpp: the engine raises for it, unreadable)."""
    if request.is_remote:
        return None
    try:
        return api().budget_marks(request.options())
    except Exception:
        return None


class ModelLoader(QObject):
    loading = Signal(str)  # a description of what is loading
    progressed = Signal(float, str)
    ready = Signal(object)  # engine.api.ModelInfo of the model now serving
    failed = Signal(str)  # a message a user can act on
    budget_refused = Signal(str, object)  # the message, the model's minimum budget in bytes (or None)
    unloaded = Signal()  # no model is loaded any more

    def __init__(self, bridge, parent: QObject | None = None):
        super().__init__(parent)
        self._bridge = bridge
        self._engine = None
        self._request: LoadRequest | None = None
        self.refused_request: LoadRequest | None = None  # the last load refused for its budget
        self._is_loading = False
        self._queued: LoadRequest | None = None  # asked for while another load ran: it starts next
        self._is_shut_down = False
        self._release_hooks: list[Callable[[object], None]] = []

    @property
    def engine(self):
        """The serving engine.api.Engine, or None while loading or when nothing is loaded."""
        return None if self._is_loading else self._engine

    @property
    def request(self) -> LoadRequest | None:
        return self._request

    @property
    def is_loading(self) -> bool:
        return self._is_loading

    def add_release_hook(self, hook: Callable[[object], None]) -> None:
        """`hook(engine)` runs on a worker thread just before `engine` is closed (replaced or at shutdown); it
        may block, and must stop whatever still uses the engine."""
        self._release_hooks.append(hook)

    def _release_and_close(self, engine) -> None:  # worker thread
        for hook in self._release_hooks:
            hook(engine)
        engine.close()

    def load(self, request: LoadRequest) -> bool:
        """Start loading; while another load runs, this one waits and starts when it ends (the newest request
        wins). False after shutdown."""
        if self._is_shut_down:
            return False
        if self._is_loading:
            self._queued = request
            return True
        self._is_loading = True
        self.loading.emit(f"Loading {request.display_name}…")
        self._request = self._with_budget_in_force(self._request)
        old_engine, previous = self._engine, self._request
        bridge = self._bridge

        def work(report):
            engine = connect_before_unload(request, report) if request.is_remote else None
            check_before_unload(request)
            if old_engine is not None:
                self._release_and_close(old_engine)
            if engine is None:
                engine = api().Engine(request.options(), progress=report)
            engine.add_plan_listener(bridge.on_plan)
            return engine

        run_in_background(work, on_success=lambda engine: self._on_load_task_succeeded(engine, request),
                          on_failure=lambda error: self._on_load_task_failed(error, previous, old_engine, request),
                          on_progress=self.progressed.emit)
        return True

    def _with_budget_in_force(self, request: LoadRequest | None) -> LoadRequest | None:
        """The serving model's request with the budget it runs at now (the slider may have changed it since it
        loaded), so that loading it again after a failed switch keeps that budget."""
        if request is None or self._engine is None or request.is_remote:
            return request
        budget = self._engine.stats().plan.budget_bytes
        return request if budget is None else replace(request, budget_bytes=budget)

    def _start_queued(self) -> bool:
        queued, self._queued = self._queued, None
        return queued is not None and not self._is_shut_down and self.load(queued)

    def _on_load_task_succeeded(self, engine, request: LoadRequest) -> None:
        self._is_loading = False
        if self._is_shut_down:
            engine.close()
            return
        self._engine, self._request = engine, request
        log.info("loaded %s: %s", engine.info.name, engine.info.plan)
        self.ready.emit(engine.info)
        self._start_queued()

    def _on_load_task_failed(self, error: BaseException, previous: LoadRequest | None, old_engine,
                             request: LoadRequest) -> None:
        self._is_loading = False
        kept_old = isinstance(error, _RefusedBeforeUnload)
        cause = error.__cause__ if kept_old and error.__cause__ else error
        if isinstance(cause, api().BudgetError):
            self.refused_request = request
            self.budget_refused.emit(str(cause), minimum_budget(request))
        else:
            self.failed.emit(user_message(error))
        if self._is_shut_down:
            return
        if kept_old and old_engine is not None:
            self.ready.emit(old_engine.info)
            self._start_queued()
            return
        self._engine = None
        if self._start_queued():
            return
        if previous is not None:
            self.load(previous)
        else:
            self.unloaded.emit()

    def shutdown(self) -> None:
        """Release and close the engine on a worker thread, blocking until it is done; later loads are ignored."""
        self._is_shut_down = True
        engine = self._engine
        if engine is not None and not self._is_loading:
            run_in_background(lambda report: self._release_and_close(engine)).wait()
        self._engine = None
