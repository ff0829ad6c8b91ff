"""Before a speculative benchmark's timed runs: one verify step of every row count, so that each count's static step
(CUDA graphs on CUDA) is captured outside the timed runs. A row count's first step runs eagerly and captures its
graphs, which costs many graphed steps; the draft length rule would otherwise bring new counts into a timed run."""

from __future__ import annotations

from engine.generation.speculative.draft_length import DraftLength
from engine.runtime.speculation import SpecCounters


def warm_verify_rows(engine, decode, draft_tokens: int) -> None:
    """decode(tokens): runs the benchmark's requests of that many tokens to their end (suite.decode_once). The
    steps draft draft_tokens, then one fewer, down to 1, and accept none, so each emits one token; the acceptance
    they would teach, their counts and the rule's state are thrown away."""
    speculation = engine.speculation
    if speculation is None or speculation.replay is None or engine.runner.padded_decode is None:
        return
    replay, counts = speculation.replay, list(range(draft_tokens, 0, -1))
    kept = speculation.draft_length, speculation.counters, replay.rate
    speculation.draft_length, speculation.counters, replay.rate = DraftLength(draft_tokens), SpecCounters(), 0.0

    def propose(request_id: str, token_ids: list[int], room: int) -> list[int]:
        return replay.drafts(speculation.vocab_size, min(room, counts.pop(0) if counts else 0))

    speculation.propose = propose
    try:
        decode(draft_tokens + 2)  # the prefill's token, then one step per count
    finally:
        del speculation.propose
        speculation.draft_length, speculation.counters, replay.rate = kept
