"""Where `wisp chat` reads its messages. On a terminal: prompt_toolkit, with line editing, history kept
across sessions, and multi-line messages (Enter sends, Alt+Enter or Esc then Enter adds a line, a paste
stays one message). From a pipe or file: one line is one message, and a line that is not UTF-8 is
refused on its own instead of reaching the model."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import BinaryIO


class BadLine(Exception):
    """One input line could not be read as text; the session goes on."""


class PipeReader:
    """Scripts and tests: one line per message, decoded strictly."""

    def __init__(self, stream: BinaryIO):
        self.stream, self.line_number = stream, 0

    def read(self) -> str | None:
        """The next message, or None at the end of the input."""
        raw = self.stream.readline()
        if not raw:
            return None
        self.line_number += 1
        try:
            return raw.decode("utf-8").rstrip("\r\n")
        except UnicodeDecodeError as error:
            raise BadLine(f"input line {self.line_number} is not valid UTF-8 (byte {error.start}); "
                          "it was not sent") from None


class TerminalReader:
    """An interactive prompt; Ctrl+C clears the line, Ctrl+D ends the session."""

    def __init__(self, session):
        self.session = session

    def read(self) -> str | None:
        try:
            return self.session.prompt("> ")
        except KeyboardInterrupt:
            return ""
        except EOFError:
            return None


def history_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "wisp" / "chat_history"


def private_history_file(path: Path) -> Path:
    """The history file, created 0600 in a 0700 folder (every message is kept in it verbatim); an existing one
    is narrowed to those modes. prompt_toolkit appends to it, which keeps the mode."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    os.close(os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    return path


def prompt_session(input=None, output=None, history=None):
    """A prompt_toolkit session: Enter sends; Alt+Enter / Esc Enter inserts a newline; pastes keep theirs."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, InMemoryHistory
    from prompt_toolkit.key_binding import KeyBindings

    bindings = KeyBindings()

    @bindings.add("escape", "enter")
    def _newline(event) -> None:
        event.current_buffer.insert_text("\n")

    if history is None:
        try:
            history = FileHistory(str(private_history_file(history_path())))
        except OSError:  # a read-only home: history for this session only
            history = InMemoryHistory()
    return PromptSession(history=history, key_bindings=bindings, multiline=False, input=input, output=output,
                         prompt_continuation=lambda width, line_number, wrap_count: ".".rjust(width - 1) + " ")


def open_reader(stdin=None):
    """TerminalReader when stdin and stdout are terminals (and prompt_toolkit is installed), else PipeReader."""
    stdin = stdin or sys.stdin
    if stdin.isatty() and sys.stdout.isatty():
        try:
            return TerminalReader(prompt_session())
        except ImportError:
            pass
    return PipeReader(stdin.buffer)
