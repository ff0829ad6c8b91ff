"""Which backend serves EngineOptions.model: the one place that knows every backend (engine.api calls it).

A remote URL runs on an OpenAI-compatible server, a .gguf file on Wisp's engine when it supports the file (else
llama.cpp: engine.gguf.backend_choice), anything else (a folder, a Hugging Face cache id, the bundled demo) on
Wisp's own engine."""

from __future__ import annotations

from engine.loading.budget_check import check_budget_fits
from engine.config import EngineOptions, Progress
from engine.errors import UnsupportedModelError
from engine.generation.core import EngineCore
from engine.generation.model_info import ModelInfo
from engine.gguf.backend_choice import LLAMA_CPP, WISP, choose_backend, llama_cpp_missing
from engine.loading.plan import check_dense_quant
from engine.loading.source import ModelSource, SourceKind, open_source


def build_engine(options: EngineOptions, progress: Progress | None = None) -> tuple[EngineCore, ModelInfo]:
    """Load the model on the calling thread; raises WispError subclasses with readable messages."""
    check_budget_fits(options)
    source = open_source(options.model)
    check_dense_quant(source, options)
    if source.kind is SourceKind.REMOTE:
        return build_remote(source.location, options, progress)
    if source.kind is SourceKind.GGUF:
        return build_gguf(source, options, progress)
    if options.backend == LLAMA_CPP:
        choose_backend(source.path, options.backend)  # refuses: llama.cpp runs .gguf files
    return build_wisp(source, options, progress)


def build_wisp(source: ModelSource, options: EngineOptions, progress: Progress | None):
    from engine.runtime.builder import build  # torch: imported when a model loads

    return build(source, options, progress)


def build_gguf(source: ModelSource, options: EngineOptions, progress: Progress | None):
    """Wisp's own engine when it runs the file's architecture and every tensor's quant type (or --backend wisp
    asks for it), else llama.cpp (the optional llama-cpp-python dependency: its absence is an error that says how
    to install it)."""
    choice = choose_backend(source.path, options.backend)
    if choice.backend == WISP:
        return build_wisp(source, options, progress)
    try:
        import llama_cpp  # noqa: F401 (its native library loads here: a broken build fails here too)

        from engine.backends.llama_cpp import build
    except (ImportError, OSError):
        raise llama_cpp_missing(source.path, choice.reason) from None
    return build(source.path, options, progress)


def build_remote(url: str, options: EngineOptions, progress: Progress | None):
    """An OpenAI-compatible server (vLLM, llama.cpp's server, another `wisp serve`) as the engine."""
    try:
        from engine.backends.remote import build
    except ImportError:
        raise UnsupportedModelError(f"{url}: remote servers need httpx: pip install 'wisp[remote]'") from None
    return build(url, options, progress)
