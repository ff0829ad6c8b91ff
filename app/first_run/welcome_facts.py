"""What the welcome dialog tells a new user, gathered on a worker thread: the hardware, the models found, the
budget the app starts with and the plan the recommended model gets at it. Only engine.api and app code."""

from __future__ import annotations

from dataclasses import dataclass

from app.engine_api import api
from app.memory.budget_range import BudgetRange, budget_range
from app.memory.plan_text import plan_summary
from app.picker.model_fit import is_gguf, plan_options
from app.picker.model_list_model import ModelRow
from app.picker.model_picker_dialog import scan_rows


@dataclass(frozen=True)
class Recommendation:
    row: ModelRow
    plan_text: str  # the memory plan in words, or why there is none

    @property
    def is_demo(self) -> bool:
        return self.row.entry.source == "demo"


@dataclass(frozen=True)
class WelcomeFacts:
    hardware: object  # engine.api.HardwareInfo
    budget: BudgetRange
    rows: tuple[ModelRow, ...]
    recommendation: Recommendation | None


def recommended_row(rows: tuple[ModelRow, ...]) -> ModelRow | None:
    """The largest usable model the user brought, else the bundled demo."""
    usable = [row for row in rows if row.is_usable and row.minimum_bytes is None]
    own = [row for row in usable if row.entry.source != "demo"]
    if own:
        return max(own, key=lambda row: row.entry.size_bytes)
    return usable[0] if usable else None


def plan_text(row: ModelRow, budget_bytes: int, gguf_engine: str = "auto") -> str:
    """The plan the engine would load the row's model with at this budget (the engine's own planner); a GGUF file
    that goes to llama.cpp has none, its fit says so."""
    engine_api = api()
    try:
        plan = engine_api.engine_plan(plan_options(row.entry, budget_bytes, gguf_engine=gguf_engine))
    except engine_api.BudgetError as err:
        return str(err)
    except engine_api.WispError as err:
        return row.fit if is_gguf(row.entry) else str(err)
    return f"{row.fit}: {plan_summary(plan, engine_api.format_bytes)}"


def gather_facts(model_folders: tuple[str, ...] = (), gguf_engine: str = "auto") -> WelcomeFacts:
    """Worker thread (imports torch, reads model configs); never touches a widget. `gguf_engine`: the app's
    GGUF engine choice."""
    engine_api = api()
    hardware = engine_api.detect_hardware()
    budget = budget_range(hardware, engine_api.format_bytes)
    rows = tuple(scan_rows(tuple(model_folders), budget.default, gguf_engine=gguf_engine))
    row = recommended_row(rows)
    recommendation = (Recommendation(row, plan_text(row, budget.default, gguf_engine)) if row is not None
                      else None)
    return WelcomeFacts(hardware, budget, rows, recommendation)


def hardware_lines(hardware, format_bytes) -> list[tuple[str, str]]:
    """(label, text) rows for the hardware section."""
    if hardware.gpus:
        gpus = [f"{gpu.name}: {format_bytes(gpu.total_bytes)} VRAM, {format_bytes(gpu.free_bytes)} free"
                for gpu in hardware.gpus]
        gpu_text = "\n".join(gpus)
    else:
        gpu_text = "No CUDA GPU found: Wisp runs models on the CPU (slower, but everything works)."
    cuda = f"CUDA {hardware.cuda_version}" if hardware.cuda_version else "no CUDA in this build"
    return [
        ("GPU", gpu_text),
        ("Memory", f"{format_bytes(hardware.host_total_bytes)} RAM ({format_bytes(hardware.host_available_bytes)} "
                   f"available), {hardware.cpu_count} CPU cores"),
        ("Software", f"PyTorch {hardware.torch_version}, {cuda}"),
    ]
