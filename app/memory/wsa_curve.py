"""The plug-in point for MV-WSA's "predicted tok/s vs expert share" curve.

A CurveProvider takes the serving engine.api.Engine and returns points (expert share of the expert+KV pool in
[0, 1], predicted decode tok/s), or None when it has no curve. The default reads EngineStats.wsa_curve, which
the engine's online MV-WSA controller refreshes at every drained barrier from recent routing (paged mode with
a budget); until it has seen routing, or in other modes, there is no curve and the panel says so."""

from __future__ import annotations

from typing import Callable, Sequence

CurvePoints = Sequence[tuple[float, float]]
CurveProvider = Callable[[object], CurvePoints | None]
UNAVAILABLE_TEXT = ("Predicted tok/s vs expert share: not available yet.\n"
                    "It appears after the first reply in paged mode with a budget.")


def no_curve(engine) -> CurvePoints | None:
    return None


def engine_curve(engine) -> CurvePoints | None:
    return engine.stats().wsa_curve


def value_at(points: CurvePoints, share: float) -> float:
    """Linear interpolation of the curve at `share` (points sorted by share)."""
    ordered = sorted(points)
    if share <= ordered[0][0]:
        return ordered[0][1]
    for (x0, y0), (x1, y1) in zip(ordered, ordered[1:]):
        if x0 <= share <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (share - x0) / (x1 - x0)
    return ordered[-1][1]
