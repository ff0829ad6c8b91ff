"""Sends budget changes to the engine and follows their outcome: pending until the engine re-plans at its next
drained barrier, then applied, or refused (the slider goes back and the reason, with the minimum, is shown)."""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, Signal, Slot

from app.background import run_in_background
from app.memory.budget_slider_widget import BudgetSliderWidget
from app.model_loader import budget_marks
from app.memory.plan_text import BUDGET_REASON, has_pager, is_remote

PENDING_TEXT = "Pending: applies when nothing is generating."


class BudgetController(QObject):
    applied = Signal(object)  # the budget now in force (or chosen while no model is loaded), in bytes
    refused = Signal(str)  # why the engine refused it
    load_requested = Signal(object)  # a model (path, or None for the demo) to load at the slider's budget

    def __init__(self, slider: BudgetSliderWidget, engine_source: Callable[[], object], parent: QObject | None = None):
        super().__init__(parent)
        self._slider, self._engine_source = slider, engine_source
        self._is_pending = False
        self._refused_model: tuple[str | None] | None = None  # the model a load refused for its budget
        slider.budget_requested.connect(self._on_slider_budget_requested)
        slider.load_at_minimum_requested.connect(self._on_slider_load_at_minimum_requested)

    @property
    def is_pending(self) -> bool:
        return self._is_pending

    @Slot(object)
    def _on_slider_budget_requested(self, num_bytes: int) -> None:
        engine = self._engine_source()
        if engine is None:
            self.applied.emit(num_bytes)
            return
        self._is_pending = True
        self._slider.set_state(PENDING_TEXT)
        engine.set_budget(num_bytes)

    def retry_if_stranded(self) -> None:
        """Call when generation has stopped. A request stopped with Stop drains the engine without passing its
        barrier check, so a pending budget would wait for the next request; asked again while the engine is
        idle, it applies at once."""
        engine = self._engine_source()
        if not self._is_pending or engine is None:
            return
        stats = engine.stats()
        if stats.pending_budget is not None and not stats.running and not stats.waiting:
            engine.set_budget(stats.pending_budget)

    def on_plan_event(self, event) -> None:
        """GUI thread (via EngineBridge.plan_changed). The online controller's re-splits leave the budget and what
        is said next to the slider (a refused load's offer) as they are."""
        was_pending, self._is_pending = self._is_pending, False
        if not was_pending and event.reason != BUDGET_REASON:
            return
        if event.error:
            if event.old.budget_bytes is not None:
                self._slider.set_budget(event.old.budget_bytes)
            self._slider.set_state("Refused: " + event.error, is_error=True)
            self.refused.emit(event.error)
            return
        self._slider.set_state("")
        if event.new.budget_bytes is not None:
            self._slider.set_budget(event.new.budget_bytes)
            self.applied.emit(event.new.budget_bytes)

    def show_load_refused(self, model: str | None, message: str, minimum: int | None) -> None:
        """A load was refused for its budget: said next to the slider (no dialog), with an offer to load at the
        model's minimum when the planner knows it."""
        self._refused_model = (model,)
        self._slider.set_state(f"Not loaded: {message}", is_error=True)
        self._slider.offer_minimum(minimum)

    @Slot(object)
    def _on_slider_load_at_minimum_requested(self, num_bytes: int) -> None:
        if self._refused_model is None:
            return
        (model,), self._refused_model = self._refused_model, None
        self._slider.set_budget(num_bytes)
        self._slider.set_state("")
        self.load_requested.emit(model)

    def fetch_marks(self, request) -> None:
        """Show the marks of the model just loaded (app.model_loader.LoadRequest), read off the GUI thread."""
        self._slider.set_marks(None)
        if request is not None:
            run_in_background(lambda report: budget_marks(request), on_success=self._slider.set_marks)

    def show_plan(self, plan, is_kept: bool = False) -> None:
        """A model was loaded with this plan; `is_kept`: the model that served before a refused load, whose
        refusal (and its offer to load at the minimum) stays next to the slider."""
        self._is_pending = False
        if plan.budget_bytes is not None:
            self._slider.set_budget(plan.budget_bytes)
        if is_kept and self._refused_model is not None:
            return
        self._refused_model = None
        self._slider.set_remote(is_remote(plan), is_applicable=has_pager(plan))
