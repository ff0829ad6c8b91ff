"""GGUF models on llama.cpp (llama-cpp-python) behind engine.api: `build()` reads the file's header, places the
model (engine/backends/gguf_placement.py), loads it through the low-level API and returns the EngineCore
(engine/backends/llama_cpp_core.py) with its ModelInfo. engine.launch calls it for .gguf paths.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from engine.alloc.memory_plan import MemoryPlan
from engine.gguf.info import GgufInfo, read_info
from engine.backends.gguf_placement import Placement, compute_buffer_bytes, memory_plan, model_params, resolve_placement
from engine.backends.gguf_tokenizer import GgufTokenizer
from engine.backends.llama_cpp_core import LlamaCppCore
from engine.backends.llama_cpp_model import LOG, ContextSettings, LlamaCppModel
from engine.config import EngineOptions, Progress
from engine.generation.model_info import DEFAULT_MAX_MODEL_LEN, ModelInfo
from engine.generation.reasoning_options import has_thinking_switch, takes_reasoning_effort
from engine.generation.tool_calls import can_call_tools


def build(path: Path, options: EngineOptions, progress: Progress | None = None) -> tuple[LlamaCppCore, ModelInfo]:
    """Load a .gguf file on llama.cpp; raises WispError subclasses with readable messages."""
    import llama_cpp

    info = read_info(path)
    placement = resolve_placement(options, info, bool(llama_cpp.llama_supports_gpu_offload()))
    n_ctx = min(options.max_model_len or DEFAULT_MAX_MODEL_LEN, info.context_length or DEFAULT_MAX_MODEL_LEN)
    model = load_model(path, placement, n_ctx, progress)
    tokenizer = GgufTokenizer(model, info.chat_templates, str(path))
    workspace = compute_buffer_bytes([line for _, line in LOG.lines], placement.device)
    plan = memory_plan(info, placement, model.n_ctx, workspace)
    core = LlamaCppCore(model, tokenizer, plan, model.n_ctx)
    described = model_info(info, placement, plan, model.n_ctx, tokenizer.has_chat_template, options)
    return core, replace(described, reasoning_effort=takes_reasoning_effort(tokenizer),
                         thinking_switch=has_thinking_switch(tokenizer), tool_calls=can_call_tools(tokenizer))


def load_model(path: Path, placement: Placement, n_ctx: int, progress: Progress | None) -> LlamaCppModel:
    import llama_cpp
    import psutil

    params, keep_alive = model_params(placement)
    callback = None
    if progress is not None:
        callback = llama_cpp.llama_progress_callback(lambda fraction, _data: report(progress, fraction))
        params.progress_callback = callback
    settings = ContextSettings(n_ctx=n_ctx, n_threads=psutil.cpu_count(logical=False) or os.cpu_count())
    model = LlamaCppModel(path, params, settings)
    model.keep_alive = (keep_alive, callback)  # llama.cpp keeps pointers to both in its copy of the params
    return model


def report(progress: Progress, fraction: float) -> bool:
    progress(float(fraction), "loading the GGUF file")
    return True  # keep loading


def model_info(info: GgufInfo, placement: Placement, plan: MemoryPlan, n_ctx: int, has_chat_template: bool,
               options: EngineOptions) -> ModelInfo:
    return ModelInfo(
        path=str(info.path), name=info.name, model_type=info.architecture, num_layers=info.num_layers,
        num_experts=info.num_experts, top_k=info.top_k, max_model_len=n_ctx, device=placement.device,
        dtype=info.file_type, has_chat_template=has_chat_template, plan=plan,
        warnings=placement_warnings(options, placement),
    )


def placement_warnings(options: EngineOptions, placement: Placement) -> tuple[str, ...]:
    warnings = []
    if placement.device == "cpu" and (options.n_cpu_moe or options.n_gpu_layers is not None):
        warnings.append("--n-gpu-layers / --n-cpu-moe do nothing on the CPU")
    if options.dtype != "auto":
        warnings.append(f"--dtype {options.dtype} does not apply to a GGUF file (its weights keep their type)")
    return tuple(warnings)
