"""Handlers of `wisp run`, `wisp chat` and `wisp doctor`."""

from __future__ import annotations

import sys
from argparse import Namespace

from engine.api import Engine, EngineOptions, FinishEvent, GenerateRequest, SamplingParams, TokenEvent
from engine.api import device_peak_bytes, expert_counters
from engine.errors import WispError
from engine.units import format_bytes, parse_size


def engine_options(args: Namespace) -> EngineOptions:
    return EngineOptions(
        model=args.model, device=args.device, dtype=args.dtype, experts=args.experts,
        expert_slots=args.expert_slots, budget_bytes=parse_size(args.budget) if args.budget else None,
        max_model_len=args.max_model_len, decode=getattr(args, "decode", "auto"),
        deterministic=not getattr(args, "nondeterministic", False), attention=getattr(args, "attention", "auto"),
        n_gpu_layers=getattr(args, "n_gpu_layers", None),
        n_cpu_moe=getattr(args, "n_cpu_moe", 0),
    )


def sampling_params(args: Namespace) -> SamplingParams:
    return SamplingParams(max_tokens=args.max_tokens, temperature=args.temperature, top_p=args.top_p,
                          top_k=args.top_k, seed=args.seed, stop=tuple(args.stop))


def chat_messages(system: str | None, turns: list[dict]) -> tuple[dict, ...]:
    return tuple(([{"role": "system", "content": system}] if system else []) + turns)


def run_command(args: Namespace) -> int:
    sampling = sampling_params(args)
    if args.chat:
        request = GenerateRequest(messages=chat_messages(args.system, [{"role": "user", "content": args.prompt}]),
                                  sampling=sampling)
    else:
        request = GenerateRequest(prompt=args.prompt, sampling=sampling)
    with Engine(engine_options(args)) as engine:
        before = expert_counters(engine)
        finish = stream_to_stdout(engine, request) if not args.json else engine.generate(request)
        if finish.reason == "error":
            raise WispError(finish.error)
        after = expert_counters(engine)
        if args.json:
            from engine.cli import print_json

            print_json(run_result(finish, before, after, device_peak_bytes(engine)))
        else:
            print_summary(finish)
    return 0


def stream_to_stdout(engine: Engine, request: GenerateRequest) -> FinishEvent:
    shown = []
    handle = engine.submit(request)
    for event in handle:
        if isinstance(event, TokenEvent) and event.text:
            shown.append(event.text)
            sys.stdout.write(event.text)
            sys.stdout.flush()
    finish = handle.finish
    tail = finish.text[len("".join(shown)):]
    sys.stdout.write(tail + "\n")
    return finish


def run_result(finish: FinishEvent, before, after, peak: int | None) -> dict:
    stats = finish.stats
    return {
        "text": finish.text,
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
            "device_peak_bytes": peak,
        },
    }


def print_summary(finish: FinishEvent) -> None:
    s = finish.stats
    print(f"[{s.prompt_tokens} prompt tokens ({s.cached_prompt_tokens} cached), {s.generated_tokens} generated, "
          f"TTFT {s.ttft_s * 1000:.0f} ms, {s.decode_tok_s:.1f} tok/s, {finish.reason}]", file=sys.stderr)


def chat_command(args: Namespace) -> int:
    sampling = sampling_params(args)
    with Engine(engine_options(args)) as engine:
        if not engine.info.has_chat_template:
            raise WispError(f"{engine.info.path} has no chat template; use `wisp run --prompt` for raw completion")
        print(f"{engine.info.name} on {engine.info.device}. Type a message; /reset starts over, /exit quits.",
              file=sys.stderr)
        turns: list[dict] = []
        for line in read_lines():
            if line.strip() in ("/exit", "/quit"):
                break
            if line.strip() == "/reset":
                turns = []
                continue
            if not line.strip():
                continue
            turns.append({"role": "user", "content": line})
            request = GenerateRequest(messages=chat_messages(args.system, turns), sampling=sampling)
            finish = stream_to_stdout(engine, request)
            if finish.reason == "error":
                print(f"wisp: error: {finish.error}", file=sys.stderr)
                turns.pop()
                continue
            turns.append({"role": "assistant", "content": finish.text})
            print_summary(finish)
    return 0


def read_lines():
    while True:
        if sys.stdin.isatty():
            sys.stderr.write("> ")
            sys.stderr.flush()
        line = sys.stdin.readline()
        if not line:
            return
        yield line.rstrip("\n")


def doctor_command(args: Namespace) -> int:
    from engine.hardware import detect

    hw = detect()
    if args.json:
        from dataclasses import asdict

        from engine.cli import print_json

        print_json(asdict(hw))
        return 0
    print(f"torch        {hw.torch_version} (CUDA {hw.cuda_version or 'not built in'})")
    if not hw.gpus:
        print("GPU          none found: Wisp runs on the CPU (slow for large models)")
    for gpu in hw.gpus:
        print(f"GPU {gpu.index}        {gpu.name}: {format_bytes(gpu.total_bytes)} total, {format_bytes(gpu.free_bytes)} free")
    print(f"host RAM     {format_bytes(hw.host_total_bytes)} total, {format_bytes(hw.host_available_bytes)} available")
    print(f"CPU cores    {hw.cpu_count}")
    return 0
