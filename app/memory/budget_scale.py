"""The budget slider's scale: positions 0..STEPS spread logarithmically between the range's ends, so that a
model's paging window (its minimum to its all-resident size, often a few hundred MiB) spans many pixels even on
a 24 GiB GPU, where a linear scale gives one pixel ~100 MiB. Sizes are exact integers (Python ints, 64-bit safe);
only positions travel through Qt's 32-bit slider."""

from __future__ import annotations

import math

STEPS = 1000
MiB = 1024**2


def bytes_at(position: int, minimum: int, maximum: int) -> int:
    """The budget at a slider position, rounded to whole MiB (the ends exactly)."""
    if position <= 0 or maximum <= minimum:
        return minimum
    if position >= STEPS:
        return maximum
    value = minimum * (maximum / minimum) ** (position / STEPS)
    return max(minimum, min(maximum, round(value / MiB) * MiB))


def position_of(num_bytes: int, minimum: int, maximum: int) -> int:
    """The slider position nearest to a budget (clamped to the ends)."""
    if maximum <= minimum or num_bytes <= minimum:
        return 0
    if num_bytes >= maximum:
        return STEPS
    return round(STEPS * math.log(num_bytes / minimum) / math.log(maximum / minimum))
