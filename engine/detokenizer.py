"""Streaming text out of generated tokens: incremental detokenization and stop-string cutting.

Both run on the engine thread, one instance per sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Decoder(Protocol):
    """What detokenizing needs of a tokenizer (engine.tokenizer.Tokenizer, the GGUF tokenizer)."""

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
    """

    def __init__(self, stop: Sequence[str]):
        self._stops = tuple(dict.fromkeys(text for text in stop if text))
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
        match = self._first_match(text)
        if match is not None:
            start, self.matched_stop = match
            self._held = ""
            return text[:start], True
        safe_length = len(text) - self._partial_stop_length(text)
        self._held = text[safe_length:]
        return text[:safe_length], False

    def flush(self) -> str:
        """Return the held-back tail when generation ends without a stop string."""
        held, self._held = self._held, ""
        return held

    def _first_match(self, text: str) -> tuple[int, str] | None:
        """The earliest stop string in `text` (the first listed wins a tie) and where it starts."""
        found = [(text.find(stop), stop) for stop in self._stops]
        return min(((start, stop) for start, stop in found if start >= 0), key=lambda match: match[0], default=None)

    def _partial_stop_length(self, text: str) -> int:
        """Length of the longest tail of `text` that is a proper prefix of some stop string."""
        return max(
            (length for stop in self._stops for length in range(1, len(stop)) if text.endswith(stop[:length])),
            default=0,
        )
