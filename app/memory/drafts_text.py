"""The memory panel's line on speculative decoding: how many drafted tokens the model accepted (engine.api.EngineStats)."""

from __future__ import annotations


def drafts_text(stats) -> str:
    """'' until a step verified drafts; then the share accepted and the verify steps' expert misses."""
    if not stats.spec_proposed:
        return ""
    share = stats.spec_accepted / stats.spec_proposed
    misses = f" · {stats.spec_verify_misses:,} expert misses in verify steps" if stats.spec_verify_misses else ""
    return (f"Drafts: {share:.0%} accepted ({stats.spec_accepted:,} of {stats.spec_proposed:,} tokens){misses}")
