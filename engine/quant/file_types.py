"""The tensor types llama.cpp's quantizer gives a MoE file's routed experts, per file type (llama_model_quantize's
rules for ffn_*_exps): gate and up of the file's base type; down of the base type, or of more bits in the layers
use_more_bits picks for Q4_K_M and Q5_K_M (the first and last eighth of the layers and every third between);
MXFP4_MOE makes every expert matrix MXFP4."""

from __future__ import annotations

from engine.errors import UnsupportedModelError

# file type -> (gate/up type, down type, down type in the layers use_more_bits picks)
FILE_TYPES = {
    "Q4_K_M": ("Q4_K", "Q4_K", "Q6_K"),
    "Q5_K_M": ("Q5_K", "Q5_K", "Q6_K"),
    "Q6_K": ("Q6_K", "Q6_K", "Q6_K"),
    "Q8_0": ("Q8_0", "Q8_0", "Q8_0"),
    "MXFP4_MOE": ("MXFP4", "MXFP4", "MXFP4"),  # gpt-oss's experts, as published and as llama.cpp makes them
}


def use_more_bits(layer: int, num_layers: int) -> bool:
    """llama.cpp's rule (src/llama-quant.cpp), integer arithmetic as there."""
    eighth = num_layers // 8
    return layer < eighth or layer >= 7 * num_layers // 8 or (layer - eighth) % 3 == 2


def expert_types(file_type: str, moe_layers: list[int], num_layers: int) -> dict[int, tuple[str, str, str]]:
    """{MoE layer: (gate, up, down) type names} of a `file_type` file with num_layers layers."""
    if file_type not in FILE_TYPES:
        raise UnsupportedModelError(f"file type {file_type!r} is not one of {', '.join(FILE_TYPES)}")
    base, down, more = FILE_TYPES[file_type]
    return {layer: (base, base, more if use_more_bits(layer, num_layers) else down) for layer in moe_layers}
