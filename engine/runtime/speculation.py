"""The engine's speculative decoding (engine thread): before a decode step, drafts for the sequences that can take
them (prompt lookup, or the model's own draft layer); after it, what was accepted feeds the draft-length rule and
the counters."""

from __future__ import annotations

import time
from dataclasses import dataclass

from engine.generation.speculative.draft_length import DraftLength
from engine.generation.speculative.mtp import MtpDrafter
from engine.generation.speculative.ngram import NgramIndex
from engine.generation.speculative.ngram_cache import NgramCache
from engine.generation.speculative.replay import AcceptanceReplay, ReplayedDrafter

DEFAULT_DRAFT_TOKENS = 8  # --draft-tokens' default: most drafts a step verifies


@dataclass
class SpecCounters:
    num_proposed: int = 0  # drafts verified
    num_accepted: int = 0  # drafts the model agreed with
    num_verify_steps: int = 0
    verify_misses: int = 0  # expert misses of the verify steps (the union of their positions' experts)


class Speculation:
    def __init__(self, max_draft_tokens: int, replay: AcceptanceReplay | None = None, vocab_size: int = 0,
                 drafter: MtpDrafter | ReplayedDrafter | None = None):
        self.draft_length = DraftLength(max_draft_tokens)
        self.drafter = drafter  # the model's own draft layer (benchmarks: a ReplayedDrafter); None: prompt lookup
        self.replay, self.vocab_size = replay, vocab_size  # benchmarks: a stated acceptance on random weights
        self.indexes: dict[str, NgramIndex] = {}  # by request id
        self.cache = NgramCache()  # finished requests' n-grams, for prompt lookup; empty on every load
        self.counters = SpecCounters()
        self.next_length: int | None = None  # the rule's choice for the next step, made early (declines_next)
        self.step_drafting_s = 0.0  # the drafter's seconds in this step (the rule counts them per draft apart)

    def propose(self, request_id: str, token_ids: list[int], max_tokens: int) -> list[int]:
        """Drafts of at most min(max_tokens, the rule's length) tokens after token_ids."""
        length, self.next_length = self.next_length, None
        num_drafts = min(max_tokens, self.draft_length.choose() if length is None else length)
        if self.drafter is not None:
            started = time.perf_counter()
            drafts = self.drafter.propose(request_id, token_ids, num_drafts)
            seconds = time.perf_counter() - started
            self.draft_length.observe_drafting(len(drafts), seconds)
            self.step_drafting_s += seconds
            return drafts
        if self.replay is not None:
            return self.replay.drafts(self.vocab_size, num_drafts)
        return self.indexes.setdefault(request_id, NgramIndex()).propose(token_ids, num_drafts, self.cache)

    def declines_next(self) -> bool:
        """The rule's choice for the next decode step, made now: True if it drafts nothing (that step may then be
        launched ahead of this one's tokens, as a plain decode step is); otherwise the next propose takes it."""
        length = self.draft_length.choose()
        self.next_length = None if length == 0 else length
        return length == 0

    def observe(self, num_proposed: int, num_accepted: int) -> None:
        self.counters.num_proposed += num_proposed
        self.counters.num_accepted += num_accepted
        self.draft_length.observe_drafts(num_proposed, num_accepted)

    def forget(self, request_id: str, token_ids: list[int] | None = None) -> None:
        """A request ended; its text (prompt and reply, token_ids) joins the n-gram cache for prompt lookup."""
        self.indexes.pop(request_id, None)
        if token_ids and self.drafter is None and self.replay is None:
            self.cache.add(token_ids)
        if self.drafter is not None:
            self.drafter.forget(request_id)
