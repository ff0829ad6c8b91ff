"""`wisp` command line. User errors exit with status 2 and one readable line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from engine.errors import WispError

EXIT_USER_ERROR = 2


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", nargs="?", default=None,
                        help="model folder, .gguf file, Hugging Face cache id org/name, or an OpenAI-compatible "
                             "server URL http(s)://host:port/v1 (default: bundled demo)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    parser.add_argument("--experts", default="resident", choices=["resident", "paged", "static"],
                        help="where expert weights live: all on the device, paged WiSP slots, or static offload")
    parser.add_argument("--expert-slots", type=int, default=None, help="paged mode: expert slots per MoE layer")
    parser.add_argument("--budget", default=None, help="most device memory to use, e.g. 12GiB")
    parser.add_argument("--max-model-len", type=int, default=None, help="context length (default: min(model, 4096))")
    parser.add_argument("--decode", default="auto", choices=["auto", "graphs", "static", "dynamic"],
                        help="decode path: CUDA graphs (auto on CUDA), static shapes without graphs, or dynamic")
    parser.add_argument("--nondeterministic", action="store_true",
                        help="CUDA: without torch's deterministic kernels (default: repeatable)")
    parser.add_argument("--attention", default="auto", choices=["auto", "triton", "sdpa"],
                        help="decode attention: the engine's Triton kernels (auto on Ampere+ CUDA; bitwise repeatable) "
                             "or PyTorch's SDPA")
    parser.add_argument("--n-gpu-layers", type=int, default=None,
                        help=".gguf on llama.cpp: layers offloaded to the GPU (default: all)")
    parser.add_argument("--n-cpu-moe", type=int, default=0,
                        help=".gguf on llama.cpp: keep the experts of the first N layers on the CPU")


def add_sampling_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api-key", dest="remote_api_key", default=None,
                        help="API key when MODEL is a server URL, http(s)://host:port/v1 (default: $WISP_REMOTE_API_KEY)")


def remote_key_scope(args: argparse.Namespace):
    """Remote engines built by this command send --api-key (engine.backends.remote reads it)."""
    key = getattr(args, "remote_api_key", None)
    if not key:
        return contextlib.nullcontext()
    try:
        from engine.backends.remote import using_api_key
    except ImportError:
        raise WispError("remote servers need httpx: pip install 'wisp[remote]'") from None
    return using_api_key(key)


def build_parser() -> argparse.ArgumentParser:
    from engine.cli_commands import chat_command, doctor_command, run_command

    parser = argparse.ArgumentParser(prog="wisp", description="Run Mixture-of-Experts LLMs on the GPU you have.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="generate from one prompt")
    add_engine_options(run)
    add_sampling_options(run)
    add_remote_options(run)
    run.add_argument("--prompt", required=True)
    run.add_argument("--chat", action="store_true", help="wrap the prompt as a user turn with the chat template")
    run.add_argument("--system", default=None, help="system prompt (with --chat)")
    run.add_argument("--json", action="store_true", help="print one JSON object with text, token_ids, logprobs, stats")
    run.set_defaults(handler=run_command)
    chat = commands.add_parser("chat", help="interactive chat in the terminal")
    add_engine_options(chat)
    add_sampling_options(chat)
    add_remote_options(chat)
    chat.add_argument("--system", default=None)
    chat.set_defaults(handler=chat_command)
    doctor = commands.add_parser("doctor", help="show torch, CUDA, GPU memory and host RAM")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=doctor_command)
    from engine.configure_command import add_parser as add_configure

    add_configure(commands)
    from engine.gguf.convert import add_parser as add_convert_gguf

    add_convert_gguf(commands)
    from engine.server.command import add_parser as add_serve

    add_serve(commands)
    add_bench(commands)
    register_optional(commands)
    return parser


def add_bench(commands) -> None:
    """Listed for help only: main() hands `wisp bench ...` to engine.bench.suite, which parses its own options."""
    commands.add_parser("bench", help="trace-driven benchmark of every expert arm over a budget sweep (CUDA)")


def register_optional(commands) -> None:
    """Commands contributed by other engine packages (traces, ...)."""
    try:
        from engine.traces.commands import register
    except ImportError:
        return
    register(commands)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # the suite parses its own options (wisp bench --help)
        from engine.bench.suite import main as suite

        suite(argv[1:])
        return 0
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None) or args.func
    try:
        with remote_key_scope(args):
            return handler(args) or 0
    except WispError as err:
        print(f"wisp: error: {err}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130


def print_json(obj) -> None:
    print(json.dumps(obj, ensure_ascii=False))


if __name__ == "__main__":
    sys.exit(main())
