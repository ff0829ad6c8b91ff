"""The tensor types llama.cpp's quantizer gives a MoE file's routed experts, per file type (llama_model_quantize's
rules for ffn_*_exps): gate and up of the file's base type; down of its own type, or of more bits in the layers
the file type picks (DOWN_PICKS): use_more_bits for Q4_K_M and Q5_K_M (the first and last eighth of the layers and
every third between), the first sixteenth for Q3_K_M, the first eighth for IQ4_XS and IQ4_NL (made without an
importance matrix; with one, their downs stay IQ4); Q3_K_S and Q2_K downs are Q3_K in every layer; MXFP4_MOE makes
every expert matrix MXFP4. A row that is not whole blocks of its type then gets the type
tensor_type_fallback gives it (fallback_type): Gemma 4 26B-A4B's down rows of 704 and Nemotron 3 Nano's hidden size
of 2688 hold Q5_0 and Q8_0 in Q4_K_M files."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.quant.types import quant_type

# file type -> (gate/up type, down type, down type in the layers DOWN_PICKS picks)
FILE_TYPES = {
    "Q2_K": ("Q2_K", "Q3_K", "Q3_K"),
    "Q3_K_S": ("Q3_K", "Q3_K", "Q3_K"),
    "Q3_K_M": ("Q3_K", "Q4_K", "Q5_K"),
    "IQ4_XS": ("IQ4_XS", "IQ4_XS", "Q5_K"),
    "IQ4_NL": ("IQ4_NL", "IQ4_NL", "Q5_K"),
    "Q4_K_M": ("Q4_K", "Q4_K", "Q6_K"),
    "Q5_K_M": ("Q5_K", "Q5_K", "Q6_K"),
    "Q6_K": ("Q6_K", "Q6_K", "Q6_K"),
    "Q8_0": ("Q8_0", "Q8_0", "Q8_0"),
    "MXFP4_MOE": ("MXFP4", "MXFP4", "MXFP4"),  # gpt-oss's experts, as published and as llama.cpp makes them
}
# llama.cpp's tensor_type_fallback: the 32-element type of a k-quant whose row is not whole 256-element super-blocks
FALLBACK = {"Q2_K": "Q4_0", "Q3_K": "Q4_0", "Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0", "IQ4_XS": "IQ4_NL"}


def use_more_bits(layer: int, num_layers: int) -> bool:
    """llama.cpp's rule (src/llama-quant.cpp), integer arithmetic as there."""
    eighth = num_layers // 8
    return layer < eighth or layer >= 7 * num_layers // 8 or (layer - eighth) % 3 == 2


def first_sixteenth(layer: int, num_layers: int) -> bool:
    return layer < num_layers // 16


def first_eighth(layer: int, num_layers: int) -> bool:
    return layer < num_layers // 8


DOWN_PICKS = {"Q4_K_M": use_more_bits, "Q5_K_M": use_more_bits, "Q3_K_M": first_sixteenth, "IQ4_XS": first_eighth,
              "IQ4_NL": first_eighth}


def down_type(file_type: str, layer: int, num_layers: int) -> str:
    """The type llama.cpp chooses for an ffn_down tensor (routed, shared or dense) of `layer`, before the fallback."""
    _, down, picked = FILE_TYPES[file_type]
    picks = DOWN_PICKS.get(file_type)
    return picked if picks is not None and picks(layer, num_layers) else down


def fallback_type(kind: str, row: int) -> str:
    """The type llama.cpp's quantizer stores a tensor it chose `kind` for with rows of `row` elements in: kind where
    the row is whole blocks of it, else kind's 32-element fallback, else (a row not whole 32-element blocks) F16."""
    if row % quant_type(kind).block_size == 0:
        return kind
    kind = FALLBACK.get(kind, kind)
    return kind if row % quant_type(kind).block_size == 0 else "F16"


def expert_types(file_type: str, moe_layers: list[int], num_layers: int, hidden: int,
                 intermediate: int) -> dict[int, tuple[str, str, str]]:
    """{MoE layer: (gate, up, down) type names} of a `file_type` file with num_layers layers whose experts are
    [intermediate, hidden] gate and up and [hidden, intermediate] down matrices."""
    if file_type not in FILE_TYPES:
        raise UnsupportedModelError(f"file type {file_type!r} is not one of {', '.join(FILE_TYPES)}")
    gate_up = fallback_type(FILE_TYPES[file_type][0], hidden)
    return {layer: (gate_up, gate_up, fallback_type(down_type(file_type, layer, num_layers), intermediate))
            for layer in moe_layers}
