"""Sampling parameters of one request (a plain, picklable dataclass shared by the API and the runtime)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import RequestError


@dataclass(frozen=True)
class SamplingParams:
    """temperature 0 is greedy; top_k 0 and top_p 1 disable those filters; seed makes sampling repeatable."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    ignore_eos: bool = False

    def __post_init__(self):
        if self.max_tokens < 1:
            raise RequestError(f"max_tokens must be at least 1, got {self.max_tokens}")
        if not 0.0 <= self.temperature <= 100.0:
            raise RequestError(f"temperature must be between 0 and 100, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise RequestError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise RequestError(f"top_k must be 0 (off) or positive, got {self.top_k}")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0
