"""`wisp bench ...`: the trace-driven benchmark of every expert arm over a budget sweep (engine/bench/suite.py).
The suite reads its own options (`wisp bench --help` lists them), so this command hands it the rest of the line."""

from __future__ import annotations

import argparse


def register(commands) -> None:
    # No option of its own ("\0" prefixes none), so every argument, --help included, goes to the suite.
    bench = commands.add_parser("bench", add_help=False, prefix_chars="\0",
                                help="trace-driven benchmark of every expert arm over a budget sweep (CUDA)")
    bench.add_argument("suite_args", nargs=argparse.REMAINDER)
    bench.set_defaults(handler=bench_command)


def bench_command(args: argparse.Namespace) -> int:
    from engine.bench.suite import main as suite

    suite(args.suite_args)
    return 0
