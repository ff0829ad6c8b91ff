"""`wisp bench --gguf FILE`: the arms run on a GGUF file's weights (dense tensors in their blocks or dequantized to
the compute dtype, the routed experts in their stored blocks in pinned host memory) instead of synthetic ones, so Wisp and llama.cpp
are measured on the same file (bench/synthetic_gguf.py makes one of a real shape from random weights)."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.gguf.facts import gguf_facts
from engine.gguf.weights import dense_model, load_gguf_weights
from engine.model.loader import LoadedWeights, resolve_dtype
from engine.quant.dense import dequantize_dense
from engine.quant.quant_modules import planned_dense_bytes
from engine.quant.gguf_store import quant_store_from_gguf


def gguf_bench_weights(path: Path, device: torch.device, dense_weights: str = "file") -> LoadedWeights:
    """The file's weights as the bench's host copy, loaded as engine.runtime.gguf_build loads them for a paged
    engine: experts pinned on the host when device is a GPU; dense tensors in their blocks (dense_weights "file")
    or dequantized ("dtype"). Raises WispError subclasses for a file Wisp's engine cannot run."""
    from engine.gguf.model_file import GgufModel

    dtype = resolve_dtype("auto", GgufModel(path).args, device)  # bf16 on a GPU, fp32 on the CPU
    weights, model, held = gguf_dense_weights(path, dtype, device, dense_weights)
    store = quant_store_from_gguf(weights.experts, torch.device("cpu"), pin=device.type == "cuda")
    return LoadedWeights(args=weights.args, model=model, store=store, dtype=dtype, dense_bytes=held)


def gguf_dense_weights(path: Path, dtype: torch.dtype, device: torch.device, dense_weights: str = "file"):
    """(GgufWeights, the dense model, its device bytes where quantized else None); the experts are not read."""
    weights = load_gguf_weights(path, dtype, device, dequantize=dequantize_dense, keep_types=dense_weights == "file")
    model = dense_model(weights, dtype, device)
    return weights, model, planned_dense_bytes(model, dtype.itemsize) if weights.quantized else None


def gguf_file_type(path: Path) -> str:
    """The file type as llama.cpp's quantizer names it, upper case (Q4_K_M): the bench's `quant` fact."""
    return gguf_facts(path).file_type.upper()
