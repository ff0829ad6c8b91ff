"""Prompt-lookup drafting: the tokens that followed the latest earlier occurrence of the text's last n tokens
(longest n first) are proposed as the next ones. Free to compute, and long runs are accepted where the reply
copies its prompt (a re-sent file, an edit of code already shown). Where the text's own suffix never occurred
before, the engine-wide cache of earlier requests' n-grams (ngram_cache.py) gives the draft."""

from __future__ import annotations

from engine.generation.speculative.ngram_cache import MAX_NGRAM, MIN_NGRAM, NgramCache


class NgramIndex:
    """Where each n-gram (MIN_NGRAM..MAX_NGRAM tokens) of a sequence last occurred, kept up to date as the sequence
    grows: position i holds the n-grams that end at i and have a continuation (i < len - 1), so the text's own last
    n-gram is looked up among earlier ones."""

    def __init__(self):
        self.next_position: dict[tuple[int, ...], int] = {}  # n-gram -> the position of the token after it
        self.num_indexed = 0  # n-grams ending before this position are in next_position

    def update(self, token_ids: list[int]) -> None:
        for end in range(self.num_indexed, len(token_ids) - 1):
            for n in range(MIN_NGRAM, min(MAX_NGRAM, end + 1) + 1):
                self.next_position[tuple(token_ids[end + 1 - n : end + 1])] = end + 1
        self.num_indexed = max(self.num_indexed, len(token_ids) - 1)

    def propose(self, token_ids: list[int], max_tokens: int, cache: NgramCache | None = None) -> list[int]:
        """At most max_tokens drafts that continue token_ids (empty when no suffix occurred before). The longest
        suffix wins; at each length the text's own occurrence first, else the cache's (earlier requests')."""
        if max_tokens <= 0:
            return []
        self.update(token_ids)
        for n in range(min(MAX_NGRAM, len(token_ids)), MIN_NGRAM - 1, -1):
            suffix = tuple(token_ids[-n:])
            start = self.next_position.get(suffix)
            if start is not None:
                return token_ids[start : start + max_tokens]
            drafts = cache.continuation(suffix, max_tokens) if cache is not None else []
            if drafts:
                return drafts
        return []
