"""Rates over the last few seconds from the engine's running totals (EngineStats counts hits, misses and
host->device bytes since load): what the pager does now, not its average since the model was loaded. Idle, the
transfer rate is 0 and the hit rate has nothing to say (None) from the first idle poll on."""

from __future__ import annotations

from collections import deque

WINDOW_S = 3.0
GB = 1e9


class RecentRates:
    def __init__(self, window_s: float = WINDOW_S):
        self._window_s = window_s
        self._samples: deque[tuple[float, int, int, int]] = deque()  # (time, hits, misses, h2d bytes)

    def clear(self) -> None:
        self._samples.clear()

    def add(self, now: float, stats) -> None:
        """A poll of engine.api.EngineStats at time `now` (seconds, monotonic). A poll whose counters have not
        moved since the last one (the reply ended or was stopped) starts the window afresh, so the rates read idle
        at once instead of averaging the last seconds of work; the poll that saw the last work still shows it."""
        counters = (stats.expert_hits, stats.expert_misses, stats.h2d_bytes)
        if self._samples and self._samples[-1][1:] == counters:
            self._samples.clear()
        self._samples.append((now, *counters))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self._window_s:
            self._samples.popleft()  # keep one sample at least window_s old: the window's start

    def _span(self) -> tuple[float, int, int, int]:
        (t0, hits0, misses0, bytes0), (t1, hits1, misses1, bytes1) = self._samples[0], self._samples[-1]
        return t1 - t0, hits1 - hits0, misses1 - misses0, bytes1 - bytes0

    @property
    def hit_rate(self) -> float | None:
        """Expert lookups served from device slots over the window; None when there were none."""
        if len(self._samples) < 2:
            return None
        _, hits, misses, _ = self._span()
        return hits / (hits + misses) if hits + misses > 0 else None

    @property
    def h2d_gb_per_s(self) -> float:
        if len(self._samples) < 2:
            return 0.0
        seconds, _, _, num_bytes = self._span()
        return num_bytes / seconds / GB if seconds > 0 else 0.0
