"""`wisp run`: generate from one prompt, streamed to stdout or printed as one JSON object."""

from __future__ import annotations

import sys
from argparse import Namespace

from engine.api import Engine, FinishEvent, GenerateRequest, TokenEvent
from engine.cli.options import (add_generation_options,
                                engine_options, note_unused_options, print_json, sampling_params, thinking_flag)
from engine.cli.reply_printer import ReplyPrinter
from engine.errors import RequestError, WispError


def register(commands) -> None:
    run = commands.add_parser("run", help="generate from one prompt")
    add_generation_options(run)
    run.add_argument("--prompt", required=True)
    run.add_argument("--chat", action="store_true", help="wrap the prompt as a user turn with the chat template")
    run.add_argument("--system", default=None, help="system prompt (with --chat)")
    run.add_argument("--image", action="append", default=[], metavar="PATH",
                     help="an image (PNG, JPEG, WebP, GIF) before the prompt in the user turn (--chat; repeatable)")
    run.add_argument("--json", action="store_true", help="print one JSON object with text, token_ids, logprobs, stats")
    run.set_defaults(handler=run_command)


def chat_messages(system: str | None, turns: list[dict]) -> tuple[dict, ...]:
    return tuple(([{"role": "system", "content": system}] if system else []) + turns)


def user_content(prompt: str, images: list[str]) -> str | list[dict]:
    """The user turn: the prompt, after the images' parts when there are any."""
    if not images:
        return prompt
    return [*({"type": "image", "image": read_image_file(path)} for path in images), {"type": "text", "text": prompt}]


def read_image_file(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as error:
        raise RequestError(f"--image {path}: cannot read it ({error.strerror or error})") from None


def run_command(args: Namespace) -> int:
    if args.image and not args.chat:
        raise RequestError("--image goes into a user turn of a chat: add --chat")
    if args.system is not None and not args.chat:
        raise RequestError("--system is the system turn of a chat: add --chat, or put it in --prompt")
    for option, value in (("--reasoning-effort", args.reasoning_effort), ("--thinking", args.thinking)):
        if value is not None and not args.chat:
            raise RequestError(f"{option} goes into the chat template: add --chat")
    sampling = sampling_params(args)
    if args.chat:
        turn = {"role": "user", "content": user_content(args.prompt, args.image)}
        request = GenerateRequest(messages=chat_messages(args.system, [turn]),
                                  sampling=sampling, reasoning_effort=args.reasoning_effort,
                                  enable_thinking=thinking_flag(args))
    else:
        request = GenerateRequest(prompt=args.prompt, sampling=sampling)
    with Engine(engine_options(args)) as engine:
        note_unused_options(engine, args)
        before = engine.expert_counters()
        finish = stream_to_stdout(engine, request) if not args.json else engine.generate(request)
        if finish.reason == "error":
            raise WispError(finish.error)
        after = engine.expert_counters()
        if args.json:
            print_json(run_result(finish, before, after, engine.device_peak_bytes()))
        else:
            print_summary(finish)
    return 0


def stream_to_stdout(engine: Engine, request: GenerateRequest) -> FinishEvent:
    printer = ReplyPrinter(sys.stdout, sys.stderr)
    handle = engine.submit(request)
    for event in handle:
        if isinstance(event, TokenEvent):
            printer.write(event.text, event.reasoning)
    finish = handle.finish
    printer.finish(finish.text, finish.reasoning)
    return finish


def run_result(finish: FinishEvent, before, after, peak: int | None) -> dict:
    stats = finish.stats
    return {
        "text": finish.text,
        "reasoning": finish.reasoning,
        "tool_calls": [{"name": call.name, "arguments": call.arguments} for call in finish.tool_calls],
        "token_ids": list(finish.token_ids),
        "logprobs": list(finish.logprobs),
        "finish_reason": finish.reason,
        "stats": {
            "prompt_tokens": stats.prompt_tokens,
            "cached_prompt_tokens": stats.cached_prompt_tokens,
            "generated_tokens": stats.generated_tokens,
            "ttft_s": stats.ttft_s,
            "decode_tok_s": stats.decode_tok_s,
            "expert_hits": after.hits - before.hits,
            "expert_misses": after.misses - before.misses,
            "expert_evictions": after.evictions - before.evictions,
            "h2d_bytes": after.h2d_bytes - before.h2d_bytes,
            "page_cache_reads": after.page_cache_reads - before.page_cache_reads,
            "page_cache_bytes": after.page_cache_bytes - before.page_cache_bytes,
            "device_peak_bytes": peak,
            "spec_proposed": stats.spec_proposed,
            "spec_accepted": stats.spec_accepted,
        },
    }


def print_summary(finish: FinishEvent) -> None:
    s = finish.stats
    print(f"[{s.prompt_tokens} prompt tokens ({s.cached_prompt_tokens} cached), {s.generated_tokens} generated, "
          f"TTFT {s.ttft_s * 1000:.0f} ms, {s.decode_tok_s:.1f} tok/s, {finish.reason}]", file=sys.stderr)
