"""Property: every command given a generated bad argument exits within a time bound with status 2 and one
line on stderr, never a traceback, and loads no model."""

from __future__ import annotations

import contextlib
import io
import re
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli import main
from tests.cli.conftest import assert_one_line_error, wisp

EXIT_WITHIN_S = 5.0
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
BASE = {"run": ["run", "--prompt", "hi", "--device", "cpu"], "chat": ["chat", "--device", "cpu"],
        "serve": ["serve", "--device", "cpu"], "doctor": ["doctor"],
        "configure": ["configure", "qwen3-30b-a3b", "--trace", "resources/traces/demo_chat.npz", "--budget", "12GiB"],
        "convert": ["convert-gguf", "resources/demo_model", "/nonexistent/x.gguf"]}
INT_OPTIONS = {  # option: (lowest, highest) accepted
    "--max-tokens": (1, 2**31 - 1), "--top-k": (0, 2**31 - 1), "--seed": (-(2**63), 2**64 - 1),
    "--max-model-len": (2, 2**31 - 1), "--expert-slots": (1, 4096), "--n-gpu-layers": (0, 2**31 - 1),
}
SERVE_INT_OPTIONS = {"--port": (0, 65535), "--max-num-seqs": (1, 4096), "--max-concurrent-requests": (1, 10**6)}
CHOICES = {"--device": ("auto", "cpu", "cuda"), "--dtype": ("auto", "bfloat16", "float16", "float32"),
           "--experts": ("resident", "paged", "static"), "--decode": ("auto", "graphs", "static", "dynamic")}
SIZE = re.compile(r"\s*[0-9]*\.?[0-9]+\s*[a-zA-Z]*\s*")


def is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def out_of(low: int, high: int) -> st.SearchStrategy[str]:
    return st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1)).map(str)


word = st.text(st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"]), min_size=1, max_size=12)
not_utf8 = st.builds(lambda a, b: a + chr(b), st.text(max_size=6), st.integers(0xDC80, 0xDCFF))  # argv's bytes
not_a_size = word.filter(lambda t: not SIZE.fullmatch(t))
BAD_NUMBERS = ["nan", "inf", "-inf", "-1", "1e9"]
GGUF_TYPES = ("f32", "f16", "bf16", "q8_0", "auto")


def option_value(commands: list[str], options: list[str], values) -> st.SearchStrategy[list[str]]:
    """BASE[command] + `--option=value`; `values` is a strategy, or a function of the option giving one."""
    pick = values if callable(values) else (lambda option: values)
    return st.tuples(st.sampled_from(commands), st.sampled_from(options)).flatmap(
        lambda pair: pick(pair[1]).map(lambda value: [*BASE[pair[0]], f"{pair[1]}={value}"]))


def bad_command_lines() -> st.SearchStrategy[list[str]]:
    engine, sampling = ["run", "chat", "serve"], ["run", "chat"]
    unknown_option = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=3, max_size=10).filter(lambda o: o[0] != "-")
    return st.one_of(
        option_value(sampling, sorted(INT_OPTIONS), word.filter(lambda t: not is_int(t))),
        option_value(sampling, sorted(INT_OPTIONS), lambda option: out_of(*INT_OPTIONS[option])),
        option_value(["serve"], sorted(SERVE_INT_OPTIONS), lambda option: out_of(*SERVE_INT_OPTIONS[option])),
        option_value(["serve"], sorted(SERVE_INT_OPTIONS), word.filter(lambda t: not is_int(t))),
        option_value(sampling, ["--temperature", "--top-p"],
                     st.one_of(word.filter(lambda t: not is_number(t)), st.sampled_from(BAD_NUMBERS))),
        option_value(engine, ["--budget"], st.one_of(not_a_size, st.sampled_from(["0", "-1GiB", "0.0GiB"]))),
        option_value(engine, sorted(CHOICES), lambda option: word.filter(lambda t: t not in CHOICES[option])),
        option_value(["configure"], ["--concurrency"], out_of(1, 4096)),
        option_value(["configure"], ["--max-context"], out_of(2, 2**31 - 1)),
        option_value(["configure"], ["--budget"], not_a_size),
        option_value(["convert"], ["--type"], word.filter(lambda t: t not in GGUF_TYPES)),
        st.tuples(st.sampled_from(sampling), st.one_of(st.just(""), not_utf8)).map(
            lambda case: [*BASE[case[0]], "--stop", case[1]]),
        not_utf8.map(lambda text: ["run", "--device", "cpu", "--prompt", text]),
        not_utf8.map(lambda text: [*BASE["chat"], "--system", text]),
        word.map(lambda text: [*BASE["run"], "--system", text]),
        st.tuples(st.sampled_from(sorted(BASE)), unknown_option).map(lambda case: [*BASE[case[0]], "--" + case[1]]),
    )


def known_prefix(argv: list[str]) -> bool:
    """argparse takes an unambiguous prefix of an option (--max for --max-tokens): not a bad argument."""
    last = argv[-1]
    return last.startswith("--") and "=" not in last and any(
        option.startswith(last) for option in [*INT_OPTIONS, *SERVE_INT_OPTIONS, *CHOICES, "--prompt", "--json",
                                               "--chat", "--system", "--stop", "--budget", "--temperature", "--top-p",
                                               "--nondeterministic", "--attention", "--n-cpu-moe", "--host",
                                               "--api-key", "--api-key-file", "--served-model-name",
                                               "--max-tokens-limit", "--max-body-size", "--concurrency",
                                               "--max-context", "--trace", "--type"])


@pytest.mark.slow
@FUZZ
@given(bad_command_lines())
def test_generated_bad_arguments_exit_2_with_one_line(argv):
    if known_prefix(argv):
        return
    err, out = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        status = main(argv)
    assert time.monotonic() - start < EXIT_WITHIN_S
    lines = err.getvalue().strip().splitlines()
    assert status == 2 and len(lines) == 1 and lines[0].startswith("wisp: error: "), (argv, err.getvalue())
    assert out.getvalue() == ""


@pytest.mark.slow
@settings(FUZZ, max_examples=4)
@given(bad_command_lines().filter(lambda argv: not known_prefix(argv)))
def test_generated_bad_arguments_in_a_real_process(argv):
    args = [a.encode("utf-8", "surrogateescape") for a in argv]  # undecodable bytes reach argv as bytes
    assert_one_line_error(wisp(*args))
