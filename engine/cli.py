"""`wisp` command line. Whatever the input, a command ends: user errors (bad arguments, text that is not
UTF-8, a budget the machine cannot hold, running out of memory) exit with status 2 and one line on stderr."""

from __future__ import annotations

import os
import sys

from engine.cli_commands import chat_command, doctor_command, run_command
from engine.cli_options import (Parser, add_engine_options, add_reasoning_options, add_remote_options,
                                add_sampling_options, remote_key_scope)
from engine.errors import WispError

EXIT_USER_ERROR = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for `yes | head`


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as installed

    try:
        return installed("wisp")
    except PackageNotFoundError:
        from engine import __version__

        return __version__


def build_parser() -> Parser:
    parser = Parser(prog="wisp", description="Run Mixture-of-Experts LLMs on the GPU you have.")
    parser.add_argument("--version", action="version", version=f"wisp {version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="generate from one prompt")
    add_engine_options(run)
    add_sampling_options(run)
    add_reasoning_options(run)
    add_remote_options(run)
    run.add_argument("--prompt", required=True)
    run.add_argument("--chat", action="store_true", help="wrap the prompt as a user turn with the chat template")
    run.add_argument("--system", default=None, help="system prompt (with --chat)")
    run.add_argument("--json", action="store_true", help="print one JSON object with text, token_ids, logprobs, stats")
    run.set_defaults(handler=run_command)
    chat = commands.add_parser("chat", help="interactive chat in the terminal (/help lists its commands)")
    add_engine_options(chat)
    add_sampling_options(chat)
    add_reasoning_options(chat)
    add_remote_options(chat)
    chat.add_argument("--system", default=None)
    chat.set_defaults(handler=chat_command)
    doctor = commands.add_parser("doctor", help="show torch, CUDA, GPU memory and host RAM")
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(handler=doctor_command)
    from engine.configure_command import add_parser as add_configure
    from engine.gguf.convert import add_parser as add_convert_gguf
    from engine.server.command import add_parser as add_serve

    add_configure(commands)
    add_convert_gguf(commands)
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
    try:
        args = build_parser().parse_args(argv)
        with remote_key_scope(args):
            return args.handler(args) or 0
    except WispError as err:
        return user_error(str(err))
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return stdout_closed()
    except (MemoryError, RuntimeError) as err:
        message = out_of_memory_message(err)
        if message is None:
            raise
        return user_error(message)


def user_error(message: str) -> int:
    """One line on stderr, whatever the message holds (a model's error text can span lines)."""
    line = " ".join(message.split()) or "unknown error"
    print(f"wisp: error: {line}", file=sys.stderr)
    return EXIT_USER_ERROR


def stdout_closed() -> int:
    """The reader went away (`wisp run ... | head`): stop quietly, and keep Python's exit-time flush of stdout
    from raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return EXIT_BROKEN_PIPE


def out_of_memory_message(err: BaseException) -> str | None:
    """A readable line for running out of host or device memory (torch raises RuntimeError subclasses), else None."""
    text = str(err)
    is_host = isinstance(err, MemoryError) or "can't allocate memory" in text or "DefaultCPUAllocator" in text
    is_device = type(err).__name__ == "OutOfMemoryError" or "out of memory" in text.lower()
    if not (is_host or is_device):
        return None
    where = "host RAM" if is_host else "device memory"
    return (f"out of {where} while loading or generating ({type(err).__name__}); give a smaller --budget, "
            "--experts paged, a smaller --max-model-len, or close other programs")


if __name__ == "__main__":
    sys.exit(main())
