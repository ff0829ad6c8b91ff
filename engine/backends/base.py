"""The contract between engine.api.Engine and whatever generates tokens: Wisp's own PyTorch engine
(engine.runtime.llm_engine.LLMEngine), llama.cpp for GGUF files, or a remote OpenAI-compatible server.

api.Engine runs one engine thread that calls these methods, and only that thread does: a backend needs no
locking of its own. A backend is built by a function `build(options, progress) -> (core, ModelInfo)`."""

from __future__ import annotations

from typing import Protocol

from engine.experts.counters import ExpertCounters
from engine.events import EngineStats, Event
from engine.requests import GenerateRequest


class EngineCore(Protocol):
    def add(self, request: GenerateRequest) -> None:
        """Validate and queue a request; raise a WispError (nothing queued) if it cannot run."""

    def step(self) -> list[Event]:
        """Advance every running request by one step; return TokenEvents and FinishEvents, in order."""

    def cancel(self, request_id: str) -> list[Event]:
        """End the request now with FinishEvent(reason="cancelled"); [] if it is unknown or done."""

    def fail_all(self, message: str) -> list[Event]:
        """End every request with FinishEvent(reason="error", error=message) after step() raised."""

    @property
    def has_work(self) -> bool:
        """Whether any request is waiting or running (the engine thread blocks on its inbox otherwise)."""

    def request_budget(self, budget_bytes: int | None) -> list:
        """Re-plan device memory at the next drained barrier; PlanEvents, or [] if not supported."""

    def at_barrier(self) -> list:
        """Called whenever the backend drains; PlanEvents of any re-plan it made."""

    def admission_barrier(self) -> list:
        """Called before each step; PlanEvents of a re-plan for waiting requests ([] where there is none)."""

    def expert_counters(self) -> ExpertCounters:
        """A snapshot of the cumulative expert counters; zeros for a backend without an expert pager."""

    def stats(self) -> EngineStats:
        """A snapshot for live displays (engine thread)."""

    def close(self) -> None:
        """Free the model (engine thread, at Engine.close())."""
