"""Which backend serves EngineOptions.model: the one place that knows every backend (engine.api calls it).

A remote URL runs on an OpenAI-compatible server, a .gguf file on Wisp's engine when it supports the file (else
llama.cpp: engine.gguf.backend_choice), anything else (a folder, a Hugging Face cache id, the bundled demo) on
Wisp's own engine."""

from __future__ import annotations

from pathlib import Path

from engine.budget_check import check_budget_fits
from engine.config import EngineOptions, Progress
from engine.errors import UnsupportedModelError
from engine.generation.core import EngineCore
from engine.generation.model_info import ModelInfo
from engine.gguf.backend_choice import LLAMA_CPP, WISP, choose_backend, llama_cpp_missing
from engine.model_path import is_remote_url, resolve_model


def build_engine(options: EngineOptions, progress: Progress | None = None) -> tuple[EngineCore, ModelInfo]:
    """Load the model on the calling thread; raises WispError subclasses with readable messages."""
    check_budget_fits(options)
    if is_remote_url(options.model):
        return build_remote(options.model, options, progress)
    folder = resolve_model(options.model)
    if folder.suffix == ".gguf":
        return build_gguf(folder, options, progress)
    if options.backend == LLAMA_CPP:
        choose_backend(folder, options.backend)  # refuses: llama.cpp runs .gguf files
    from engine.runtime.builder import build_engine as build_wisp  # torch: imported when a model loads

    return build_wisp(folder, options, progress)


def build_gguf(path: Path, options: EngineOptions, progress: Progress | None):
    """Wisp's own engine when it runs the file's architecture and every tensor's quant type (or --backend wisp
    asks for it), else llama.cpp (the optional llama-cpp-python dependency: its absence is an error that says how
    to install it)."""
    choice = choose_backend(path, options.backend)
    if choice.backend == WISP:
        from engine.runtime.builder import build_gguf_engine  # torch: imported when a model loads

        return build_gguf_engine(path, options, progress)
    try:
        import llama_cpp  # noqa: F401 (its native library loads here: a broken build fails here too)

        from engine.backends.llama_cpp import build
    except (ImportError, OSError):
        raise llama_cpp_missing(path, choice.reason) from None
    return build(path, options, progress)


def build_remote(url: str, options: EngineOptions, progress: Progress | None):
    """An OpenAI-compatible server (vLLM, llama.cpp's server, another `wisp serve`) as the engine."""
    try:
        from engine.backends.remote import build
    except ImportError:
        raise UnsupportedModelError(f"{url}: remote servers need httpx: pip install 'wisp[remote]'") from None
    return build(url, options, progress)
