"""ModelSizes of a GGUF file for the memory planner: experts at their real stored bytes (a slot holds one
expert in its block format); dense weights at their stored bytes where they stay in blocks (engine.quant.dense),
at the dtype they are dequantized to otherwise."""

from __future__ import annotations

import dataclasses

from engine.alloc.memory_plan import ModelSizes
from engine.gguf.model_file import GgufModel
from engine.model.sizes import model_sizes
from engine.quant.types import slot_bytes


def gguf_model_sizes(model: GgufModel, dtype_bytes: int, keep_types: bool = False) -> ModelSizes:
    """As engine.model.sizes.model_sizes, but `expert_bytes` is the slot of the engine's quantized store: the
    largest MoE layer's stored bytes per expert (llama.cpp's mixes give some layers' ffn_down more bits), each
    matrix 16-byte aligned (engine.quant.types.slot_bytes, as engine.quant.layout lays rows out); KV at `dtype_bytes`.
    keep_types: the dense tensors engine.quant.dense keeps in blocks count their stored bytes, plus the scratch
    of the largest one a prompt step dequantizes."""
    sizes = model_sizes(model.args, dtype_bytes)
    expert_bytes = max(slot_bytes(layer.gate.bytes_per_expert, layer.up.bytes_per_expert, layer.down.bytes_per_expert)
                       for layer in model.expert_layers().values())
    sizes = dataclasses.replace(sizes, expert_bytes=expert_bytes)
    if not keep_types:
        return sizes
    from engine.gguf.weights import param_types
    from engine.model.model_tree import meta_model
    from engine.quant.dense import sizes_in_blocks

    return sizes_in_blocks(sizes, meta_model(model.args), param_types(model))
