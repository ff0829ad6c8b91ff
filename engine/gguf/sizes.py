"""ModelSizes of a GGUF file for the memory planner: experts at their real stored bytes (a slot holds one
expert in its block format), dense weights at the dtype they are dequantized to."""

from __future__ import annotations

import dataclasses

from engine.alloc.memory_plan import ModelSizes
from engine.gguf.model_file import GgufModel
from engine.model.sizes import model_sizes
from engine.quant.gguf_store import quant_layout_of


def gguf_model_sizes(model: GgufModel, dtype_bytes: int) -> ModelSizes:
    """As engine.model.sizes.model_sizes, but `expert_bytes` is the slot of the engine's quantized store: the
    largest MoE layer's stored bytes per expert (llama.cpp's mixes give some layers' ffn_down more bits), each
    matrix 16-byte aligned (engine.quant.layout); KV at `dtype_bytes`."""
    sizes = model_sizes(model.args, dtype_bytes)
    return dataclasses.replace(sizes, expert_bytes=quant_layout_of(model.expert_layers()).expert_bytes)
