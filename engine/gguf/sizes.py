"""ModelSizes of a GGUF file for the memory planner: experts at their real stored bytes (a slot holds one
expert in its block format), dense weights at the dtype they are dequantized to."""

from __future__ import annotations

import dataclasses

from engine.alloc.memory_plan import ModelSizes
from engine.gguf.model_file import GgufModel
from engine.model.sizes import model_sizes


def gguf_model_sizes(model: GgufModel, dtype_bytes: int) -> ModelSizes:
    """As engine.model.sizes.model_sizes, but `expert_bytes` is the largest MoE layer's stored bytes per expert
    (llama.cpp's mixes give some layers' ffn_down more bits) and KV at `dtype_bytes`."""
    sizes = model_sizes(model.args, dtype_bytes)
    expert_bytes = max(layer.bytes_per_expert for layer in model.expert_layers().values())
    return dataclasses.replace(sizes, expert_bytes=expert_bytes)
