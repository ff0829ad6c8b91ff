"""`wisp chat`: slash commands answered by the REPL (never sent to the model), Ctrl+C stopping only the
reply, and the terminal prompt's multi-line input, paste and history."""

import io
import json

import pytest

from engine.api import Engine, EngineOptions, SamplingParams
from engine.cli.chat_input import BadLine, PipeReader, TerminalReader, prompt_session
from engine.cli.chat_repl import ChatSession

SAMPLING = SamplingParams(max_tokens=24, ignore_eos=True)


@pytest.fixture(scope="module")
def engine():
    with Engine(EngineOptions(model=None, device="cpu")) as engine:
        yield engine


def session(engine, out=None) -> tuple[ChatSession, io.StringIO]:
    err = io.StringIO()
    return ChatSession(engine, SAMPLING, out=out or io.StringIO(), err=err), err


def test_commands_are_answered_by_the_repl(engine, tmp_path):
    chat, err = session(engine)
    chat.handle("/help")
    assert "/save FILE" in err.getvalue() and chat.turns == [] and chat.out.getvalue() == ""
    chat.handle("hello")
    assert [turn["role"] for turn in chat.turns] == ["user", "assistant"]
    chat.handle(f"/save {tmp_path / 'chat.json'}")
    assert json.loads((tmp_path / "chat.json").read_text()) == chat.turns
    chat.handle("/reset")
    assert chat.turns == [] and "conversation cleared: 2 messages" in err.getvalue()
    chat.handle("/save bad\x00name.json")
    assert "cannot write" in err.getvalue()
    chat.handle("/frobnicate")
    assert "unknown command /frobnicate" in err.getvalue()
    assert chat.handle("/exit") is False


class InterruptingOutput(io.StringIO):
    """A terminal whose user presses Ctrl+C once the reply has started."""

    def __init__(self, after_writes: int):
        super().__init__()
        self.writes_left = after_writes

    def write(self, text: str) -> int:
        self.writes_left -= 1
        if self.writes_left == 0:
            raise KeyboardInterrupt
        return super().write(text)


def test_ctrl_c_stops_the_reply_and_keeps_the_conversation(engine):
    chat, err = session(engine, out=InterruptingOutput(after_writes=3))
    chat.handle("tell me a long story")
    assert "stopped" in err.getvalue()
    user, assistant = chat.turns
    assert user["content"] == "tell me a long story" and 0 < len(assistant["content"])
    finish = chat.stream(chat_request(chat, "and then?"))
    assert finish.reason == "length" and finish.stats.prompt_tokens > 10  # the story is still in the context


def chat_request(chat, line):
    from engine.api import GenerateRequest

    return GenerateRequest(messages=tuple(chat.messages() + [{"role": "user", "content": line}]), sampling=SAMPLING)


def test_a_message_the_engine_refuses_is_one_line_and_the_session_goes_on(engine):
    chat, err = session(engine)
    chat.handle("a\udcffb")
    assert "not valid UTF-8" in err.getvalue() and chat.turns == []


def test_piped_lines_that_are_not_utf8_are_refused_alone():
    reader = PipeReader(io.BytesIO(b"one\n\xff\xfe\nthree\n"))
    assert reader.read() == "one"
    with pytest.raises(BadLine, match="line 2"):
        reader.read()
    assert reader.read() == "three" and reader.read() is None


@pytest.fixture
def terminal():
    from prompt_toolkit.history import InMemoryHistory
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    with create_pipe_input() as keys:
        yield keys, TerminalReader(prompt_session(input=keys, output=DummyOutput(), history=InMemoryHistory()))


def test_alt_enter_adds_a_line_and_enter_sends(terminal):
    keys, reader = terminal
    keys.send_text("def f():\x1b\r    return 1\r")
    assert reader.read() == "def f():\n    return 1"


def test_a_pasted_block_stays_one_message(terminal):
    keys, reader = terminal
    keys.send_text("\x1b[200~line one\nline two\nline three\x1b[201~\r")
    assert reader.read() == "line one\nline two\nline three"


def test_history_ctrl_c_and_ctrl_d(terminal):
    keys, reader = terminal
    keys.send_text("first\r")
    assert reader.read() == "first"
    keys.send_text("\x1b[A\r")  # Up recalls the previous message
    assert reader.read() == "first"
    keys.send_text("half a thought\x03")  # Ctrl+C clears the line
    assert reader.read() == ""
    keys.send_text("\x04")  # Ctrl+D on an empty line ends the session
    assert reader.read() is None
