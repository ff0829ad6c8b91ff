"""The engine-wide n-gram cache (llama.cpp's dynamic lookup cache): the 1- to 3-grams of every finished request's
prompt and reply, each with the tokens that followed its latest occurrence. Prompt lookup consults it where the
request's own text has no continuation for a suffix, so a reply can draft the boilerplate an earlier reply wrote.
Bounded: at most max_entries n-grams, the least recently added or used evicted first. Engine thread only."""

from __future__ import annotations

from collections import OrderedDict

MAX_NGRAM = 3  # the longest suffix looked up; a longer match is rarer and only a little more precise
MIN_NGRAM = 1

DEFAULT_MAX_ENTRIES = 1 << 16  # n-grams kept; each holds at most CONTINUATION_TOKENS tokens
CONTINUATION_TOKENS = 16  # the tokens kept after an n-gram: the longest draft the cache gives
# The most of a finished request's text added: its last tokens (the reply and the end of its prompt). Adding costs
# the engine thread about 3.5 ms per 1,000 tokens, so a long conversation re-sent at every turn stalls the other
# streams ~15 ms at most when a request ends, not once per its whole length.
ADDED_TOKENS = 4096


class NgramCache:
    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.max_entries = max_entries
        self.continuations: OrderedDict[tuple[int, ...], tuple[int, ...]] = OrderedDict()  # n-gram -> what followed

    def __len__(self) -> int:
        return len(self.continuations)

    def add(self, token_ids: list[int]) -> None:
        """Record a finished request's text (its last ADDED_TOKENS): every n-gram with a continuation, later
        occurrences replacing earlier."""
        continuations, token_ids = self.continuations, token_ids[-ADDED_TOKENS:]
        for end in range(len(token_ids) - 1):
            following = tuple(token_ids[end + 1 : end + 1 + CONTINUATION_TOKENS])
            for n in range(MIN_NGRAM, min(MAX_NGRAM, end + 1) + 1):
                key = tuple(token_ids[end + 1 - n : end + 1])
                continuations[key] = following
                continuations.move_to_end(key)
        while len(continuations) > self.max_entries:
            continuations.popitem(last=False)

    def continuation(self, ngram: tuple[int, ...], max_tokens: int) -> list[int]:
        """At most max_tokens tokens that followed ngram in an earlier request (empty when none did)."""
        following = self.continuations.get(ngram)
        if following is None:
            return []
        self.continuations.move_to_end(ngram)
        return list(following[:max_tokens])

    def clear(self) -> None:
        self.continuations.clear()
