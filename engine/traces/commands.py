"""`wisp trace stats TRACE [--json]` and `wisp trace record MODEL --prompts FILE --out TRACE`.

The CLI owner calls ``register(subparsers)``; each leaf parser sets ``func`` (args -> exit code).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.traces import format as trace_format
from engine.traces.stats import format_summary, summary


def stats_command(args: argparse.Namespace) -> int:
    stats = summary(trace_format.load(args.trace))
    print(json.dumps(stats) if args.json else format_summary(stats))
    return 0


def record_command(args: argparse.Namespace) -> int:
    from engine.traces.hf_record import read_prompts, record

    trace = record(args.model, read_prompts(args.prompts), args.workload, args.max_tokens)
    trace_format.save(trace, args.out)
    print(f"{args.out}: {trace.num_steps} steps, {int(trace.num_tokens.sum())} tokens")
    return 0


def register(subparsers) -> argparse.ArgumentParser:
    trace = subparsers.add_parser("trace", help="record routing traces and print their statistics")
    commands = trace.add_subparsers(dest="trace_command", required=True)
    stats = commands.add_parser("stats", help="expert popularity, token-to-token reuse, LRU hit-rate curve")
    stats.add_argument("trace", type=Path)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(func=stats_command)
    record = commands.add_parser("record", help="record a routing trace with transformers (greedy)")
    record.add_argument("model", type=Path, help="a Hugging Face model folder")
    record.add_argument("--prompts", type=Path, required=True,
                        help="JSON list, JSONL of {prompt}/{messages}, or one prompt per line")
    record.add_argument("--out", type=Path, required=True)
    record.add_argument("--workload", default="custom", help="workload tag stored in the header")
    record.add_argument("--max-tokens", type=int, default=64)
    record.set_defaults(func=record_command)
    return trace
