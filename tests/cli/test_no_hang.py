"""No input hangs a command: text that is not UTF-8 and budgets the machine cannot hold end with one line and
status 2, on Wisp's engine and on llama.cpp (.gguf). A seed torch cannot take is refused while the command line is
parsed, before any model or backend is chosen: tests/cli/test_one_line_errors.py checks it in process."""

import subprocess
import sys

import pytest

from tests.cli.conftest import ROOT, assert_one_line_error, wisp

NOT_UTF8 = b"\xff\xfe"


@pytest.fixture(params=["demo", "gguf"])
def model(request) -> list[str]:
    """The positional MODEL argument: none (the demo on Wisp's engine) or its GGUF twin."""
    return [] if request.param == "demo" else [str(request.getfixturevalue("demo_gguf"))]


def test_a_prompt_that_is_not_utf8_is_refused(model):
    assert_one_line_error(wisp("run", *model, "--device", "cpu", "--prompt", NOT_UTF8), "prompt", "UTF-8")


def test_a_chat_line_that_is_not_utf8_is_refused_alone(model):
    lines = b"hi" + NOT_UTF8 + b"\nhello\n/exit\n"
    outcome = wisp("chat", *model, "--device", "cpu", "--max-tokens", "3", stdin=lines)
    assert outcome.status == 0 and "line 1 is not valid UTF-8" in outcome.stderr
    assert "generated" in outcome.stderr  # the next line was answered
    assert "Traceback" not in outcome.stderr


def test_a_budget_beyond_the_machine_is_refused_before_allocating():
    """One budget past this machine's RAM: every such budget meets the same comparison (engine/loading/budget_check.py)."""
    assert_one_line_error(wisp("run", "--device", "cpu", "--budget", "1TiB", "--prompt", "hi"), "budget", "RAM")


def test_a_closed_pipe_ends_quietly():
    command = (f"{sys.executable} -m engine.cli run --device cpu --prompt 'def f():' --max-tokens 200 "
               "--temperature 0 | head -c 1 >/dev/null; exit ${PIPESTATUS[0]}")
    done = subprocess.run(["bash", "-c", command], capture_output=True, cwd=ROOT, timeout=90,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr
    assert done.returncode in (0, 141)  # 141 if the reader left before the answer ended
