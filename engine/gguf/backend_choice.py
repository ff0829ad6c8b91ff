"""Which engine runs a model: `--backend auto|wisp|llama.cpp`. Wisp's engine runs safetensors folders and the
GGUF files whose architecture and every tensor's quant type it supports; llama.cpp runs any GGUF it knows."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from engine.config import BACKENDS
from engine.errors import RequestError, UnsupportedModelError

WISP, LLAMA_CPP = "wisp", "llama.cpp"
LLAMA_CPP_REQUIREMENT = "llama-cpp-python>=0.3.36,<0.4"  # pyproject.toml's `llama` extra


@dataclass(frozen=True)
class BackendChoice:
    """`backend` is "wisp" or "llama.cpp"; `reason` is one line for logs, `wisp doctor` and the picker."""

    backend: str
    reason: str


def is_gguf(model: str | Path | None) -> bool:
    return model is not None and str(model).lower().endswith(".gguf")


def choose_backend(model: str | Path | None, requested: str = "auto") -> BackendChoice:
    """The engine for `model` (a folder, HF cache id, .gguf path or None for the demo) under `requested`.

    Raises RequestError for an unknown choice or llama.cpp asked for a non-GGUF model; UnsupportedModelError
    when "wisp" is asked for a GGUF it cannot run (the message says why and suggests llama.cpp);
    ModelFormatError when the GGUF file is missing or unreadable (no engine could run it).
    """
    if requested not in BACKENDS:
        raise RequestError(f"backend must be one of {', '.join(BACKENDS)}, got '{requested}'")
    if not is_gguf(model):
        if requested == LLAMA_CPP:
            raise RequestError(f"--backend llama.cpp runs .gguf files, and {model or 'the demo model'} is not one: "
                               "convert it with `wisp convert-gguf`, or use --backend wisp")
        return BackendChoice(WISP, "a safetensors model runs on Wisp's engine")
    if requested == LLAMA_CPP:
        return BackendChoice(LLAMA_CPP, "--backend llama.cpp")
    from engine.gguf.model_file import GgufModel

    supported, reason = GgufModel(Path(model).expanduser()).support()  # an unreadable file raises here
    if supported:
        return BackendChoice(WISP, reason)
    if requested == WISP:
        raise UnsupportedModelError(f"{reason}; run it with --backend llama.cpp (or auto)")
    return BackendChoice(LLAMA_CPP, f"llama.cpp: {reason}")


def llama_cpp_installed() -> bool:
    """Whether llama-cpp-python can be found, without loading its native library."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except ValueError:  # sys.modules["llama_cpp"] is None: imports of it are blocked
        return False


def llama_cpp_install_command() -> str:
    """The command that installs llama-cpp-python into the Python environment Wisp runs in."""
    python = "python" if getattr(sys, "frozen", False) else shlex.quote(sys.executable)
    return f'{python} -m pip install "{LLAMA_CPP_REQUIREMENT}"'


def llama_cpp_missing(model: str | Path, reason: str) -> UnsupportedModelError:
    """The error for a GGUF file that llama.cpp would run (`reason`: why) while llama-cpp-python is missing."""
    return UnsupportedModelError(
        f"{Path(model).name} runs on llama.cpp ({reason}), and llama-cpp-python is not installed. Install it (pip "
        f"builds llama.cpp from source: 5-20 minutes on 2 cores), then load the file again:\n"
        f"{llama_cpp_install_command()}")
