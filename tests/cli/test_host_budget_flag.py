"""`--host-budget SIZE`: parsed into EngineOptions, bad values one line and status 2, and a budget that nothing
can work with refused with one line naming the flag; a capped `wisp run --json` counts its page-cache reads. In
process (engine.cli.main): nothing here needs a child (tests/cli/test_no_hang.py runs the ones that do)."""

import json

import pytest

from engine.cli import build_parser, main
from engine.cli.options import engine_options
from tests.cli.conftest import Outcome, assert_one_line_error


@pytest.mark.parametrize("text, expected", [("2GiB", 2 * 1024**3), ("1500MB", 1500 * 10**6), ("4096", 4096)])
def test_host_budget_sizes_reach_the_engine_options(text, expected):
    args = build_parser().parse_args(["run", "--prompt", "hi", "--host-budget", text])
    assert engine_options(args).host_budget_bytes == expected


def test_without_the_flag_the_machine_decides():
    args = build_parser().parse_args(["run", "--prompt", "hi"])
    assert engine_options(args).host_budget_bytes is None and engine_options(args).pin_trace is None


def test_a_pin_trace_reaches_the_engine_options():
    args = build_parser().parse_args(["run", "--prompt", "hi", "--host-budget", "8GiB", "--pin-trace", "t.npz"])
    assert engine_options(args).pin_trace == "t.npz"


@pytest.mark.parametrize("value", ["lots", "0", "-1GiB", "12 parsecs"])
def test_bad_host_budgets_are_one_line_and_status_2(value, capsys):
    assert main(["run", "--prompt", "hi", f"--host-budget={value}"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wisp: error: ") and "--host-budget" in lines[0]


def wisp_in_process(capsys, *args: str) -> Outcome:
    """`wisp ARGS` through engine.cli.main, as the program runs it (its return value is the exit status): what
    these tests check needs no child process."""
    capsys.readouterr()
    status = main(list(args))
    captured = capsys.readouterr()
    return Outcome(status, captured.out.encode(), captured.err)


def test_a_capped_run_reports_its_page_cache_reads(tiny_model_dir, capsys):
    folder = tiny_model_dir("qwen3_moe")
    outcome = wisp_in_process(capsys, "run", str(folder), "--device", "cpu", "--experts", "paged", "--expert-slots",
                              "2", "--host-budget", "200KiB", "--prompt", "def fib(n):", "--max-tokens", "4", "--json")
    assert outcome.status == 0, outcome.stderr
    stats = json.loads(outcome.stdout)["stats"]
    assert stats["page_cache_reads"] > 0 and stats["page_cache_bytes"] > 0


def test_a_host_budget_nothing_can_work_with_is_one_line_naming_its_sizes_in_readable_units(tiny_model_dir, capsys):
    """A budget below the staging rows; every such budget meets the same check."""
    outcome = wisp_in_process(capsys, "run", str(tiny_model_dir("qwen3_moe")), "--device", "cpu", "--experts",
                              "paged", "--host-budget", "60KiB", "--prompt", "hi", "--max-tokens", "2")
    assert_one_line_error(outcome, "--host-budget", "needs 192.0 KiB of host RAM", "the engine may use 60.0 KiB")
    assert "0.00 GiB" not in outcome.stderr
