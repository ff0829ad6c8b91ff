"""Recent decode throughput (tokens per second over a sliding window of steps)."""

from __future__ import annotations

import time
from collections import deque


class Throughput:
    def __init__(self, window_s: float = 3.0):
        self.window_s = window_s
        self.steps: deque[tuple[float, int]] = deque()
        self.last_step: float | None = None

    def record(self, now: float, num_tokens: int, is_prefill: bool) -> None:
        if not is_prefill and self.last_step is not None:
            self.steps.append((now - self.last_step, num_tokens))
        self.last_step = now
        while len(self.steps) > 1 and sum(dt for dt, _ in self.steps) > self.window_s:
            self.steps.popleft()

    def prune(self) -> None:
        """Forget decode steps older than the window, so an idle engine reads 0 tok/s."""
        if self.last_step is None or time.perf_counter() - self.last_step > self.window_s:
            self.steps.clear()

    def idle(self) -> None:
        """Called when the engine drains: the next step's gap is not decode time."""
        self.last_step = None

    @property
    def decode_tok_s(self) -> float:
        elapsed = sum(dt for dt, _ in self.steps)
        return sum(n for _, n in self.steps) / elapsed if elapsed > 0 else 0.0
