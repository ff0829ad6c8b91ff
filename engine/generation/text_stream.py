"""Per-request streaming text: incremental UTF-8-safe detokenisation followed by stop-string matching."""

from __future__ import annotations

from engine.detokenizer import StopStringMatcher
from engine.tokenizer import Tokenizer


class TextStream:
    def __init__(self, tokenizer: Tokenizer, stop: tuple[str, ...]):
        self.detokenizer = tokenizer.detokenizer()
        self.matcher = StopStringMatcher(stop)
        self.parts: list[str] = []
        self.stopped = False

    def push(self, token_id: int) -> tuple[str, bool]:
        """-> (text safe to show now, whether a stop string just completed)."""
        if self.stopped:
            return "", True
        text, self.stopped = self.matcher.feed(self.detokenizer.push(token_id))
        self.parts.append(text)
        return text, self.stopped

    def final_text(self) -> str:
        """All text of the request; flushes what was held back (an incomplete character, a possible stop prefix)."""
        if not self.stopped:
            text, self.stopped = self.matcher.feed(self.detokenizer.flush())
            self.parts.append(text)
            if not self.stopped:
                self.parts.append(self.matcher.flush())
        return "".join(self.parts)
