"""`wisp chat`: an interactive chat in the terminal (engine/cli/chat_repl.py), or one message a line from a pipe."""

from __future__ import annotations

import sys
from argparse import Namespace

from engine.api import Engine, GenerateRequest
from engine.cli.options import (add_generation_options,
                                engine_options, note_unused_options, sampling_params, thinking_flag)
from engine.errors import WispError


def register(commands) -> None:
    chat = commands.add_parser("chat", help="interactive chat in the terminal (/help lists its commands)")
    add_generation_options(chat)
    chat.add_argument("--system", default=None)
    chat.set_defaults(handler=chat_command)


def chat_command(args: Namespace) -> int:
    from engine.cli.chat_input import open_reader
    from engine.cli.chat_repl import ChatSession

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
