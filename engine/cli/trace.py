"""`wisp trace stats TRACE [--json]`, `wisp trace record MODEL --prompts FILE --out TRACE` and
`wisp trace synth --shape SHAPE [statistics] --out TRACE`.

engine.cli.program calls ``register(subparsers)``; each leaf parser sets ``handler`` (args -> exit code).
"""

from __future__ import annotations

import argparse
import json
import math
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


def synth_command(args: argparse.Namespace) -> int:
    from engine.traces.synth import SynthError, spec_for_shape, synthesize

    if not args.out.parent.is_dir():
        raise SynthError(f"{args.out}: the folder {args.out.parent} does not exist")
    spec = spec_for_shape(args.shape, carry_over=args.carry_over, skew=args.popularity_skew, cover90=args.cover90,
                          top_share=args.top_share, requests=args.requests, prompt=args.prompt, tokens=args.tokens,
                          seed=args.seed)
    trace = synthesize(spec)
    try:
        trace_format.save(trace, args.out)
    except OSError as error:
        raise SynthError(f"{args.out}: cannot write the trace ({error.strerror})") from error
    notes = trace.header.notes
    print(f"{args.out}: {trace.num_steps} steps, {int(trace.num_tokens.sum())} tokens; carry-over {spec.carry_over}, "
          f"{math.ceil(notes['expected_cover90'])} experts cover 90%, top expert {notes['expected_top_share']:.1%} "
          f"(check: wisp trace stats {args.out})")
    return 0


def int_at_least(minimum: int):
    """An argparse type: an integer >= minimum (a one-line usage error otherwise)."""
    def integer(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return integer


def add_synth(commands) -> None:
    from engine.model.shapes import SHAPES

    synth = commands.add_parser("synth", help="make a routing trace from stated statistics (carry-over, popularity)")
    synth.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES), help="routing topology")
    synth.add_argument("--carry-over", type=float, default=None,
                       help="share of a token's top-k the previous token of its request used "
                            "(default: the published figure, Qwen3-30B-A3B 0.46, Mixtral-8x7B 0.38)")
    synth.add_argument("--popularity-skew", type=float, default=None, help="Zipf exponent of expert popularity")
    synth.add_argument("--cover90", type=int_at_least(1), default=None,
                       help="experts that carry 90%% of routing (default: published, Qwen3-30B-A3B 65)")
    synth.add_argument("--top-share", type=float, default=None,
                       help="the most popular expert's share of routing (default: published, Qwen3-30B-A3B 0.043)")
    synth.add_argument("--requests", type=int_at_least(1), default=8, help="batch-1 requests, one after another")
    synth.add_argument("--prompt", type=int_at_least(1), default=512, help="prompt tokens (one prefill step)")
    synth.add_argument("--tokens", type=int_at_least(1), default=128, help="decode tokens per request")
    synth.add_argument("--seed", type=int_at_least(0), default=0)
    synth.add_argument("--out", type=Path, required=True)
    synth.set_defaults(handler=synth_command)


def register(subparsers) -> argparse.ArgumentParser:
    trace = subparsers.add_parser("trace", help="record routing traces and print their statistics")
    commands = trace.add_subparsers(dest="trace_command", required=True)
    stats = commands.add_parser("stats", help="expert popularity, token-to-token reuse, LRU hit-rate curve")
    stats.add_argument("trace", type=Path)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=stats_command)
    record = commands.add_parser("record", help="record a routing trace with transformers (greedy)")
    record.add_argument("model", type=Path, help="a Hugging Face model folder")
    record.add_argument("--prompts", type=Path, required=True,
                        help="JSON list, JSONL of {prompt}/{messages}, or one prompt per line")
    record.add_argument("--out", type=Path, required=True)
    record.add_argument("--workload", default="custom", help="workload tag stored in the header")
    record.add_argument("--max-tokens", type=int, default=64)
    record.set_defaults(handler=record_command)
    add_synth(commands)
    return trace
