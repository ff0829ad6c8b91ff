"""How a found model fits the budget, as the engine itself would plan it: the same EngineOptions the app loads
with (paged experts, this device, the app's GGUF engine choice), through engine.api.engine_plan, so that "fits"
here means the loaded engine keeps every expert resident. A GGUF file that goes to llama.cpp has no Wisp plan:
llama.cpp places it itself. A budget too small to load is a fact about the budget, not a broken model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.engine_api import ExpertMode, api

REMOTE_FIT = "memory managed by the server"
LLAMA_CPP_FIT = "runs on llama.cpp, which places it itself"


@dataclass(frozen=True)
class Fit:
    text: str
    minimum_bytes: int | None = None  # set when the budget is too small: the least that loads it

    @property
    def needs_larger_budget(self) -> bool:
        return self.minimum_bytes is not None


def is_gguf(entry) -> bool:
    return entry.source == "gguf" or Path(entry.path).suffix.lower() == ".gguf"


def plan_options(entry, budget_bytes: int | None, device: str = "auto", gguf_engine: str = "auto",
                 dense_quant: str | None = None):
    """The EngineOptions the app would load the entry with (app.model_loader.LoadRequest.options' rule)."""
    backend = gguf_engine if is_gguf(entry) else "auto"
    return api().EngineOptions(model=entry.path, device=device, experts=ExpertMode.PAGED, backend=backend,
                               budget_bytes=budget_bytes, dense_quant=None if is_gguf(entry) else dense_quant)


def fit_at_budget(entry, budget_bytes: int | None, device: str, gguf_engine: str = "auto",
                  dense_quant: str | None = None) -> Fit:
    """Worker thread: the fit of a usable engine.api.ModelEntry (not a remote server); no budget yet (the
    hardware is still being detected): no fit."""
    engine_api = api()
    if budget_bytes is None:
        return Fit("–")
    options = plan_options(entry, budget_bytes, device, gguf_engine, dense_quant)
    try:
        plan = engine_api.engine_plan(options)
    except engine_api.BudgetError:
        minimum = engine_api.budget_marks(options).minimum
        return Fit(f"needs a larger budget: at least {engine_api.format_bytes(minimum)}", minimum)
    except engine_api.WispError as err:
        if not is_gguf(entry):
            raise
        if gguf_engine == "wisp":
            return Fit(str(err))  # Wisp's engine asked for a file it cannot run: the reason
        if gguf_engine == "llama.cpp":
            return Fit(LLAMA_CPP_FIT)
        return Fit(engine_api.fit_summary(options))  # auto chose llama.cpp: its wording
    slots = plan.min_layer_slots
    if slots >= entry.num_experts:
        return Fit("fits: every expert resident")
    return Fit(f"pages experts ({slots} of {entry.num_experts} slots per layer)")
