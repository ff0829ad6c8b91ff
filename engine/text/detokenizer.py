"""Streaming text out of generated tokens: incremental detokenization and stop-string cutting.

Both run on the engine thread, one instance per sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Decoder(Protocol):
    """What detokenizing needs of a tokenizer (engine.text.tokenizer.Tokenizer, the GGUF tokenizer)."""

    special_token_ids: frozenset[int]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        ...

REPLACEMENT_CHARACTER = "\ufffd"
# Tokens of context decoded before the new ones, so that decoders that treat the first token specially
# (SentencePiece strips its leading space) and multi-token characters decode as they do mid-text.
CONTEXT_TOKENS = 5


class IncrementalDetokenizer:
    """Turns a stream of token ids into text deltas without re-decoding the whole text.

    Each push decodes only the tokens since the previous delta plus a little context (vLLM's
    prefix/read offsets). Text that ends in U+FFFD is held back until a later token completes the
    character. The deltas plus `flush()` concatenate to `tokenizer.decode(ids, skip_special_tokens)`;
    with `prompt_ids` they concatenate to the text the generated ids add after the prompt. `kept_ids` are special
    tokens whose text stays even when skipping special tokens (a reasoning format's markers).
    """

    def __init__(self, tokenizer: Decoder, prompt_ids: Sequence[int] = (), skip_special_tokens: bool = True,
                 kept_ids: frozenset[int] = frozenset()):
        self._tokenizer = tokenizer
        self._skipped_ids = tokenizer.special_token_ids - kept_ids if skip_special_tokens else frozenset()
        # decode() drops skipped tokens before its decoder runs, so dropping them on arrival changes no text
        # and keeps them out of every window.
        self._ids = [token_id for token_id in prompt_ids if token_id not in self._skipped_ids]
        self._read_offset = len(self._ids)
        self._prefix_offset = max(self._read_offset - CONTEXT_TOKENS, 0)
        self._prefix_text = self._decode_window(self._read_offset)

    def push(self, token_id: int) -> str:
        """Add one generated token; return the text it completes ("" while a character is incomplete)."""
        if token_id in self._skipped_ids:
            return ""
        self._ids.append(token_id)
        return self._take_new_text(is_final=False)

    def flush(self) -> str:
        """Return the held-back text at the end of the sequence, even if it ends in U+FFFD."""
        return self._take_new_text(is_final=True)

    def _take_new_text(self, is_final: bool) -> str:
        text = self._decode_window(len(self._ids))
        is_incomplete = text.endswith(REPLACEMENT_CHARACTER) and not is_final
        if len(text) <= len(self._prefix_text) or is_incomplete:
            return ""
        delta = text[len(self._prefix_text) :]
        self._prefix_offset, self._read_offset = self._read_offset, len(self._ids)
        self._prefix_text = self._decode_window(self._read_offset)
        return delta

    def _decode_window(self, end: int) -> str:
        return self._tokenizer.decode(self._ids[self._prefix_offset : end], skip_special_tokens=False)


class StopStringMatcher:
    """Cuts streamed text at the first stop string.

    `feed(delta)` returns the text that is safe to emit and whether a stop string completed. A tail that
    could begin a stop string is held back until later text settles it; the stop string itself and
    everything after it are never emitted. With no stop strings, text passes straight through.
    Each stop string is followed by a Knuth-Morris-Pratt automaton, so a delta costs time linear in its own
    length (amortised), however long the stop strings or the held tail are.
    """

    def __init__(self, stop: Sequence[str]):
        self._stops = [StopAutomaton(text) for text in dict.fromkeys(text for text in stop if text)]
        self._held = ""
        self.matched_stop: str | None = None

    @property
    def is_stopped(self) -> bool:
        return self.matched_stop is not None

    def feed(self, delta: str) -> tuple[str, bool]:
        """Take the next text delta; return (text safe to emit, stopped)."""
        if self.is_stopped:
            return "", True
        text = self._held + delta
        match = self._first_match(delta, offset=len(self._held))
        if match is not None:
            start, self.matched_stop = match
            self._held = ""
            return text[:start], True
        safe_length = len(text) - max((automaton.matched for automaton in self._stops), default=0)
        self._held = text[safe_length:]
        return text[:safe_length], False

    def flush(self) -> str:
        """Return the held-back tail when generation ends without a stop string."""
        held, self._held = self._held, ""
        return held

    def _first_match(self, delta: str, offset: int) -> tuple[int, str] | None:
        """The earliest-starting stop string that completes in `delta` (the first listed wins a tie), and where
        it starts in held + delta. Each automaton stops at its own first completion."""
        best = None
        for automaton in self._stops:
            end = automaton.advance(delta)
            if end is not None:
                start = offset + end - len(automaton.stop)
                best = (start, automaton.stop) if best is None or start < best[0] else best
        return best


class StopAutomaton:
    """Knuth-Morris-Pratt matching of one stop string over streamed text: `matched` is the length of the
    longest tail of the text so far that is a prefix of the stop string."""

    def __init__(self, stop: str):
        self.stop = stop
        self.fallback = prefix_function(stop)
        self.matched = 0

    def advance(self, text: str) -> int | None:
        """Read `text`; the index just past the stop string's first completion in it, or None."""
        stop, fallback, matched = self.stop, self.fallback, self.matched
        for index, char in enumerate(text):
            while matched and stop[matched] != char:
                matched = fallback[matched - 1]
            if stop[matched] == char:
                matched += 1
            if matched == len(stop):
                self.matched = matched
                return index + 1
        self.matched = matched
        return None


def prefix_function(text: str) -> list[int]:
    """For each i, the length of the longest proper prefix of text[:i + 1] that is also its suffix."""
    result = [0] * len(text)
    for index in range(1, len(text)):
        length = result[index - 1]
        while length and text[index] != text[length]:
            length = result[length - 1]
        result[index] = length + (text[index] == text[length])
    return result
