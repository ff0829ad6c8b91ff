"""A reasoning model's reply in the CLI: `wisp run --json` has a separate "reasoning" field, `wisp run` and
`wisp chat` show the reasoning apart (dimmed on a terminal, on stderr otherwise), and the conversation keeps
the answer alone for the next turn."""

import io

from engine.api import GenerateRequest, SamplingParams
from engine.cli.chat_repl import ChatSession
from engine.cli.run import run_result, stream_to_stdout
from engine.experts.counters import ExpertCounters
from engine.cli.reply_printer import DIM, NORMAL, ReplyPrinter
from tests.scripted_engine import REASONING_REPLY, ScriptedEngine

CHAT = GenerateRequest(messages=({"role": "user", "content": "Hi"},))


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_run_json_has_reasoning_apart_from_the_text():
    finish = ScriptedEngine(REASONING_REPLY).generate(CHAT)
    result = run_result(finish, ExpertCounters(), ExpertCounters(), None)
    assert (result["text"], result["reasoning"]) == ("Hello there!", "The user greets me. Reply briefly.")
    assert result["tool_calls"] == [] and len(result["token_ids"]) == len(REASONING_REPLY)


def test_run_streams_the_answer_to_stdout_and_the_reasoning_to_stderr(capsys):
    stream_to_stdout(ScriptedEngine(REASONING_REPLY), CHAT)
    out, err = capsys.readouterr()
    assert (out, err) == ("Hello there!\n", "The user greets me. Reply briefly.\n")


def test_on_a_terminal_the_reasoning_is_dimmed_before_the_answer():
    terminal = Terminal()
    printer = ReplyPrinter(terminal, io.StringIO())
    for text, reasoning in REASONING_REPLY:
        printer.write(text, reasoning)
    printer.finish("Hello there!", "The user greets me. Reply briefly.")
    assert terminal.getvalue() == f"{DIM}The user greets me. Reply briefly.{NORMAL}\n\nHello there!\n"


def test_the_final_event_completes_what_the_stream_held_back():
    out, side = io.StringIO(), io.StringIO()
    printer = ReplyPrinter(out, side)
    printer.write("", "think")
    printer.finish("answer", "thinking")
    assert (out.getvalue(), side.getvalue()) == ("answer\n", "thinking\n")


def test_chat_shows_reasoning_apart_and_sends_back_the_answer_only():
    engine = ScriptedEngine(REASONING_REPLY)
    out, err = io.StringIO(), io.StringIO()
    chat = ChatSession(engine, SamplingParams(max_tokens=8), out=out, err=err)
    chat.handle("Hi")
    chat.handle("Again")
    assert out.getvalue() == "Hello there!\n" * 2
    assert err.getvalue().count("The user greets me. Reply briefly.\n") == 2
    second = engine.requests[1].messages
    assert second[1] == {"role": "assistant", "content": "Hello there!"}
