"""A streamed reply on the terminal: a reasoning model's reasoning shown apart from its answer.

On a terminal the reasoning is dimmed and a blank line parts it from the answer; when the output is not a
terminal (a pipe, a file) the reasoning goes to the side stream (stderr), so the output holds the answer alone.
"""

from __future__ import annotations

from typing import TextIO

DIM, NORMAL = "\x1b[2m", "\x1b[0m"


class ReplyPrinter:
    """Writes one reply's text and reasoning as they stream (the caller's thread)."""

    def __init__(self, out: TextIO, side: TextIO):
        self.out, self.side = out, side
        self.is_terminal = getattr(out, "isatty", lambda: False)()
        self.num_text = self.num_reasoning = 0
        self._is_reasoning_open = False  # reasoning was written and the answer has not started yet

    def write(self, text: str, reasoning: str = "") -> None:
        if reasoning:
            self._write_reasoning(reasoning)
        if text:
            self._close_reasoning()
            self.out.write(text)
            self.out.flush()
            self.num_text += len(text)

    def finish(self, text: str, reasoning: str) -> None:
        """Write what the streamed pieces did not carry of the final `text` and `reasoning`, and end the line."""
        self.write(text[self.num_text:], reasoning[self.num_reasoning:])
        self._close_reasoning(is_answer_next=False)
        self.out.write("\n")
        self.out.flush()

    def _write_reasoning(self, reasoning: str) -> None:
        stream = self.out if self.is_terminal else self.side
        if self.is_terminal and not self._is_reasoning_open:
            stream.write(DIM)
        stream.write(reasoning)
        stream.flush()
        self._is_reasoning_open = True
        self.num_reasoning += len(reasoning)

    def _close_reasoning(self, is_answer_next: bool = True) -> None:
        if not self._is_reasoning_open:
            return
        self._is_reasoning_open = False
        if self.is_terminal:
            self.out.write(NORMAL + ("\n\n" if is_answer_next else ""))
        else:
            self.side.write("\n")
            self.side.flush()
