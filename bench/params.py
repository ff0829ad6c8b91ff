"""Run a Python module with some engine module attributes set first: how a bench script passes a sweep's value or
an arm's setting (a tile configuration, a GEMV kernel, a row limit) to a run, the engine itself having no switch.

    python3 -m bench.params engine.quant.grouped_gemm.TILES=64,32,64,8,3 -- -m engine.bench.suite --shape ...
    python3 -m bench.params engine.quant.linear.GEMV=word -- -m pytest -m gpu tests/gpu/test_quant_kernels.py

Each NAME=VALUE names a module attribute that exists; VALUE is read as parse_value reads it. After `--`: `-m MODULE ARGS...` or `SCRIPT.py ARGS...`, run as `python3` would."""

from __future__ import annotations

import ast
import importlib
import runpy
import sys


def parse_value(text: str):
    """A Python literal (42, 0.5, None, {...}, [...], (...)), else the text: "64,32,64,8,3" stays text (the tile
    options take text), where literal_eval would make it a tuple."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return text if isinstance(value, tuple) and not text.lstrip().startswith("(") else value


def set_parameter(assignment: str) -> None:
    """"package.module.NAME=VALUE": the module's NAME set to VALUE; an unknown module or name is refused."""
    target, separator, value = assignment.partition("=")
    module_name, _, name = target.rpartition(".")
    if not separator or not module_name:
        raise SystemExit(f"bench.params: {assignment!r} is not package.module.NAME=VALUE")
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise SystemExit(f"bench.params: {module_name} has no attribute {name}")
    setattr(module, name, parse_value(value))


def main(argv: list[str]) -> None:
    if "--" not in argv:
        raise SystemExit(__doc__)
    split = argv.index("--")
    for assignment in argv[:split]:
        set_parameter(assignment)
    command = argv[split + 1:]
    if command[:1] == ["-m"] and len(command) > 1:
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    elif command:
        sys.argv = command
        runpy.run_path(command[0], run_name="__main__")
    else:
        raise SystemExit("bench.params: nothing to run after --")


if __name__ == "__main__":
    main(sys.argv[1:])
