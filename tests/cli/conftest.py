"""Run `wisp` as a user does: a child process with a time limit, so that a hang fails the test instead of
holding the suite."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXIT_WITHIN_S = 90  # a child imports torch and may load the demo model on a busy 2-core runner


@dataclass
class Outcome:
    status: int
    stdout: bytes
    stderr: str


def wisp(*args: str | bytes, stdin: bytes | None = None, timeout_s: float = EXIT_WITHIN_S) -> Outcome:
    """`python -m engine.cli ARGS` (argv may hold bytes that are not UTF-8); a hang raises TimeoutExpired."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "engine.cli", *args]
    done = subprocess.run(command, input=stdin if stdin is not None else b"", capture_output=True, env=env,
                          timeout=timeout_s, cwd=ROOT)
    return Outcome(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"))


def assert_one_line_error(outcome: Outcome, *words: str) -> None:
    lines = outcome.stderr.strip().splitlines()
    assert outcome.status == 2, outcome.stderr
    assert len(lines) == 1 and lines[0].startswith("wisp: error: "), outcome.stderr
    assert "Traceback" not in outcome.stderr
    for word in words:
        assert word in lines[0]


@pytest.fixture(scope="session")
def demo_gguf(demo_gguf):
    """tests/conftest.py's demo GGUF twin, for the tests that run it on llama.cpp: skipped without llama-cpp-python."""
    pytest.importorskip("llama_cpp")
    return demo_gguf
