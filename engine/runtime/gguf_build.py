"""Load a GGUF MoE file for Wisp's own engine: the tokenizer and ModelArgs from its metadata, dense weights
expanded to the compute dtype, and the routed experts kept in their block formats in (pinned) host memory or on
the device, planned at their stored bytes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from engine.config import EngineOptions, Progress
from engine.gguf.model_file import GgufModel
from engine.gguf.weights import load_gguf_weights
from engine.hardware import pick_device
from engine.model.loader import DTYPES, LoadedWeights
from engine.model.sizes import model_sizes
from engine.model.transformer import meta_model
from engine.quant.dense import dequantize_dense
from engine.quant.gguf_store import quant_layout_of, quant_store_from_gguf
from engine.tokenizer import Tokenizer


def gguf_dtype(requested: str, device: torch.device) -> torch.dtype:
    """'auto': fp32 on the CPU (no fast half-precision matmul there), bf16 on a GPU (the file has no dtype of its
    own: its blocks are dequantized to the compute dtype)."""
    if requested != "auto":
        return DTYPES[requested]
    return torch.float32 if device.type == "cpu" else torch.bfloat16


def load_gguf(path: Path, options: EngineOptions, progress: Progress | None):
    """-> (LoadedWeights, Tokenizer, options, ModelSizes, PlanRequest, MemoryPlan, device) for finish_engine.
    The plan is made before anything large is read, so a budget below the minimum costs no loading."""
    from engine.runtime.builder import plan_for_options

    device = pick_device(options.device)
    model_file = GgufModel(path)
    model_file.check()
    args = model_file.args
    tokenizer: Tokenizer = model_file.tokenizer()
    dtype = gguf_dtype(options.dtype, device)
    layout = quant_layout_of(model_file.expert_layers())  # the slot size, before any expert is read
    sizes = dataclasses.replace(model_sizes(args, dtype.itemsize), expert_bytes=layout.expert_bytes)
    plan_request, plan = plan_for_options(options, args, sizes)
    weights = load_gguf_weights(path, dtype, device, progress, dequantize=dequantize_dense)
    model = meta_model(args)
    model.load_state_dict(weights.state_dict, strict=True, assign=True)
    model.attach_rotary(device)
    model.eval()
    on_host = options.experts != "resident"
    store = quant_store_from_gguf(weights.experts, torch.device("cpu") if on_host else device,
                                  pin=on_host and device.type == "cuda")
    loaded = LoadedWeights(args=args, model=model, store=store, dtype=dtype)
    return loaded, tokenizer, options, sizes, plan_request, plan, device

