"""How a found model fits the budget, as the engine itself would plan it: the same EngineOptions the app loads
with (paged experts, this device), through engine.api.engine_plan, so that "fits" here means the loaded engine
keeps every expert resident. A budget too small to load is a fact about the budget, not a broken model."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine_api import api

REMOTE_FIT = "memory managed by the server"


@dataclass(frozen=True)
class Fit:
    text: str
    minimum_bytes: int | None = None  # set when the budget is too small: the least that loads it

    @property
    def needs_larger_budget(self) -> bool:
        return self.minimum_bytes is not None


def fit_at_budget(entry, budget_bytes: int | None, device: str) -> Fit:
    """Worker thread: the fit of a usable engine.api.ModelEntry (not a remote server); no budget yet (the
    hardware is still being detected): no fit."""
    engine_api = api()
    if budget_bytes is None:
        return Fit("–")
    if entry.source == "gguf":
        return Fit(engine_api.fit_summary(entry.path, budget_bytes))
    options = engine_api.EngineOptions(model=entry.path, device=device, experts="paged", budget_bytes=budget_bytes)
    try:
        plan = engine_api.engine_plan(options)
    except engine_api.BudgetError:
        minimum = engine_api.budget_marks(options).minimum
        return Fit(f"needs a larger budget: at least {engine_api.format_bytes(minimum)}", minimum)
    slots = plan.min_layer_slots
    if slots >= entry.num_experts:
        return Fit("fits: every expert resident")
    return Fit(f"pages experts ({slots} of {entry.num_experts} slots per layer)")
