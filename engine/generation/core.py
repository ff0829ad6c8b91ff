"""The contract between engine.api.Engine and whatever generates tokens: Wisp's own PyTorch engine
(engine.runtime.llm_engine.LLMEngine), llama.cpp for GGUF files, or a remote OpenAI-compatible server.

api.Engine runs one engine thread that calls these methods, and only that thread does: a backend needs no
locking of its own. A backend is built by a function `build(..., options, progress) -> (core, ModelInfo)`;
engine.launch picks which.

Live memory re-planning is its own small contract (MemoryControl): Wisp's engine re-splits device memory at
drained barriers, while a backend that places the model once at load hands over FixedMemory."""

from __future__ import annotations

import time
from typing import Protocol

from engine.alloc.memory_plan import MemoryPlan
from engine.events import EngineStats, Event
from engine.experts.counters import ExpertCounters
from engine.generation.plan_event import PlanEvent
from engine.generation.throughput import Throughput
from engine.requests import GenerateRequest


class MemoryControl(Protocol):
    """How the device-memory split changes while the engine runs (engine thread)."""

    def request_budget(self, budget_bytes: int | None) -> list[PlanEvent]:
        """Re-plan device memory for a new budget at the next drained barrier: PlanEvents of what happened now."""
        ...

    def at_barrier(self) -> list[PlanEvent]:
        """Called whenever the engine drains; PlanEvents of any re-plan made."""
        ...

    def admission_barrier(self) -> list[PlanEvent]:
        """Called before each step; PlanEvents of a re-plan for waiting requests."""
        ...


class FixedMemory(MemoryControl):
    """A placement fixed when the model loaded: never re-planned. refusal: what a new budget is answered
    (None: the request is dropped without an event, where the device is not ours to plan)."""

    def __init__(self, plan: MemoryPlan, refusal: str | None):
        self.plan, self.refusal = plan, refusal

    def request_budget(self, budget_bytes: int | None) -> list[PlanEvent]:
        if self.refusal is None:
            return []
        return [PlanEvent(time.time(), self.plan, None, "budget changed", error=self.refusal)]

    def at_barrier(self) -> list[PlanEvent]:
        return []

    def admission_barrier(self) -> list[PlanEvent]:
        return []


class EngineCore(Protocol):
    memory: MemoryControl
    throughput: Throughput  # decode tok/s over recent steps; api.Engine marks idle gaps

    def add(self, request: GenerateRequest) -> None:
        """Validate and queue a request; raise a WispError (nothing queued) if it cannot run."""
        ...

    def step(self) -> list[Event]:
        """Advance every running request by one step; return TokenEvents and FinishEvents, in order."""
        ...

    def cancel(self, request_id: str) -> list[Event]:
        """End the request now with FinishEvent(reason="cancelled"); [] if it is unknown or done."""
        ...

    def fail_all(self, message: str) -> list[Event]:
        """End every request with FinishEvent(reason="error", error=message, error_kind=ErrorKind.FAILED)
        after step() raised."""
        ...

    @property
    def has_work(self) -> bool:
        """Whether any request is waiting or running (the engine thread blocks on its inbox otherwise)."""
        ...

    def expert_counters(self) -> ExpertCounters:
        """A snapshot of the cumulative expert counters; zeros for a backend without an expert pager."""
        ...

    def stats(self) -> EngineStats:
        """A snapshot for live displays (engine thread)."""
        ...

    def close(self) -> None:
        """Free the model (engine thread, at Engine.close())."""
        ...
