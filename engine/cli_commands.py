"""Handlers of `wisp run`, `wisp chat` and `wisp doctor`."""

from __future__ import annotations

import sys
from argparse import Namespace

from engine.api import Engine, FinishEvent, GenerateRequest, TokenEvent
from engine.alloc.host_tier import host_allowance, reserve_bytes
from engine.api import device_peak_bytes, expert_counters
from engine.cli_options import engine_options, print_json, sampling_params, thinking_flag
from engine.errors import RequestError, WispError
from engine.reply_printer import ReplyPrinter
from engine.units import format_bytes

__all__ = ["run_command", "chat_command", "doctor_command", "engine_options", "sampling_params"]


def chat_messages(system: str | None, turns: list[dict]) -> tuple[dict, ...]:
    return tuple(([{"role": "system", "content": system}] if system else []) + turns)


def run_command(args: Namespace) -> int:
    if args.system is not None and not args.chat:
        raise RequestError("--system is the system turn of a chat: add --chat, or put it in --prompt")
    for option, value in (("--reasoning-effort", args.reasoning_effort), ("--thinking", args.thinking)):
        if value is not None and not args.chat:
            raise RequestError(f"{option} goes into the chat template: add --chat")
    sampling = sampling_params(args)
    if args.chat:
        request = GenerateRequest(messages=chat_messages(args.system, [{"role": "user", "content": args.prompt}]),
                                  sampling=sampling, reasoning_effort=args.reasoning_effort,
                                  enable_thinking=thinking_flag(args))
    else:
        request = GenerateRequest(prompt=args.prompt, sampling=sampling)
    with Engine(engine_options(args)) as engine:
        note_unused_options(engine, args)
        before = expert_counters(engine)
        finish = stream_to_stdout(engine, request) if not args.json else engine.generate(request)
        if finish.reason == "error":
            raise WispError(finish.error)
        after = expert_counters(engine)
        if args.json:
            print_json(run_result(finish, before, after, device_peak_bytes(engine)))
        else:
            print_summary(finish)
    return 0


def note_unused_options(engine: Engine, args: Namespace) -> None:
    """A line on stderr for each reasoning option the model's chat template does not read."""
    for option, value, taken, what in (
            ("--reasoning-effort", args.reasoning_effort, engine.info.reasoning_effort, "reasoning effort"),
            ("--thinking", args.thinking, engine.info.thinking_switch, "thinking switch")):
        if value is not None and not taken:
            print(f"wisp: note: {engine.info.name}'s chat template takes no {what}; {option} changes nothing",
                  file=sys.stderr)


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
        },
    }


def print_summary(finish: FinishEvent) -> None:
    s = finish.stats
    print(f"[{s.prompt_tokens} prompt tokens ({s.cached_prompt_tokens} cached), {s.generated_tokens} generated, "
          f"TTFT {s.ttft_s * 1000:.0f} ms, {s.decode_tok_s:.1f} tok/s, {finish.reason}]", file=sys.stderr)


def chat_command(args: Namespace) -> int:
    from engine.chat_input import open_reader
    from engine.chat_repl import ChatSession

    sampling = sampling_params(args)
    if args.system is not None:  # a system prompt that is not text is refused before the model loads
        GenerateRequest(messages=({"role": "system", "content": args.system},))
    with Engine(engine_options(args)) as engine:
        if not engine.info.has_chat_template:
            raise WispError(f"{engine.info.path} has no chat template; use `wisp run --prompt` for raw completion")
        print(f"{engine.info.name} on {engine.info.device}. Type a message; /help lists the commands, /exit quits.",
              file=sys.stderr)
        note_unused_options(engine, args)
        ChatSession(engine, sampling, args.system, reasoning_effort=args.reasoning_effort,
                    enable_thinking=thinking_flag(args)).run(open_reader())
    return 0


def doctor_command(args: Namespace) -> int:
    from engine.hardware import detect

    hw = detect()
    if args.json:
        from dataclasses import asdict

        print_json(asdict(hw))
        return 0
    print(f"torch        {hw.torch_version} (CUDA {hw.cuda_version or 'not built in'})")
    if not hw.gpus:
        print("GPU          none found: Wisp runs on the CPU (slow for large models)")
    for gpu in hw.gpus:
        print(f"GPU {gpu.index}        {gpu.name}: {format_bytes(gpu.total_bytes)} total, {format_bytes(gpu.free_bytes)} free")
    print(f"host RAM     {format_bytes(hw.host_total_bytes)} total, {format_bytes(hw.host_available_bytes)} available")
    print(f"host budget  {format_bytes(host_allowance(None, hw.host_available_bytes, hw.host_total_bytes))} for "
          f"experts (available less a {format_bytes(reserve_bytes(hw.host_total_bytes))} reserve; --host-budget caps "
          "it, paged experts past it stay memory-mapped)")
    print(f"CPU cores    {hw.cpu_count}")
    return 0
