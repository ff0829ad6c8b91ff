"""`wisp` command line. Whatever the input, a command ends: user errors (bad arguments, text that is not
UTF-8, a budget the machine cannot hold, running out of memory) exit with status 2 and one line on stderr."""

from __future__ import annotations

import os
import sys

from engine.cli import bench, chat, configure, convert_gguf, doctor, run, serve, trace
from engine.cli.options import Parser, remote_key_scope
from engine.errors import WispError

COMMANDS = (run, chat, doctor, configure, convert_gguf, serve, bench, trace)  # each module's register() adds one
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
    for command in COMMANDS:
        command.register(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
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
