"""`wisp`, the command line: one module per command, each with `register(commands)` that adds its subparser
and sets `handler` (parsed args -> exit status); program.py lists them and turns user errors into one line.
The shared options live in options.py, which imports no command module.

`main` and `build_parser` load with their first use, so importing one command module loads no other."""

from __future__ import annotations

_PROGRAM_NAMES = ("main", "build_parser", "out_of_memory_message", "user_error")


def __getattr__(name: str):
    if name in _PROGRAM_NAMES:
        from engine.cli import program

        return getattr(program, name)
    raise AttributeError(f"module 'engine.cli' has no attribute '{name}'")
