"""The memory panel's line on speculative decoding: how many drafted tokens the model accepted
(engine.api.EngineStats)."""

from __future__ import annotations


def drafts_text(stats) -> str:
    """'' until a step verified drafts; then the share accepted and the verify steps' expert misses."""
    proposed, accepted, verify_misses = (getattr(stats, name, 0) for name in
                                         ("spec_proposed", "spec_accepted", "spec_verify_misses"))
    if not proposed:  # stats of a backend without speculation carry no such counters
        return ""
    misses = f" · {verify_misses:,} expert misses in verify steps" if verify_misses else ""
    return f"Drafts: {accepted / proposed:.0%} accepted ({accepted:,} of {proposed:,} tokens){misses}"
