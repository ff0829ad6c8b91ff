"""The types llama.cpp's quantizer gives a MoE file's dense tensors, per file type (llama_tensor_get_type in
src/llama-quant.cpp, for the file types engine.quant.file_types names): what a synthetic benchmark model holds so
that its rows compare with llama.cpp's file of the same shape.

- token_embd: the file's base type; output (lm_head, or token_embd when tied): Q6_K, Q8_0 in a Q8_0 file.
- attn_v: Q6_K in the layers use_more_bits picks for Q4_K_M and Q5_K_M; Q5_K in the first two layers of Q3_K_M
  files, Q4_K after; where 4 or more query heads share a KV head (GQA), Q4_K in Q2_K files (else Q3_K) and Q5_K in
  IQ4_XS and IQ4_NL ones; Q8_0 in 8-expert models (attn_k too).
- attn_output: Q5_K in 8-expert models of the file types but Q5_K_M, Q6_K and Q8_0; in others Q4_K (Q3_K_M) or Q3_K
  (Q2_K); attn_q and the rest: the base type.
- ffn_down of dense layers and shared experts: as the routed experts' (engine.quant.file_types.down_type).
- Not quantized: routers (ffn_gate_inp), one-row tensors (the shared-expert gate, stored 1-D), norms and biases.
- A row that is not whole blocks of its type gets llama.cpp's fallback (engine.quant.file_types.fallback_type: Q5_0,
  Q5_1, Q8_0); one that is not even whole 32-element blocks (F16 in the file) stays in the compute dtype here, as do
  the dense tensors of MXFP4_MOE files."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.quant.file_types import FILE_TYPES, down_type, fallback_type, use_more_bits

NOT_QUANTIZED = ("mlp.gate.weight", "shared_expert_gate.weight", "router.proj.weight")  # routers stay float


def _layer(param: str) -> int:
    return int(param.split(".")[1])


# their attn_output is Q5_K in 8-expert models
EIGHT_EXPERT_OUTPUT = ("Q2_K", "Q3_K_S", "Q3_K_M", "Q4_K_M", "IQ4_XS", "IQ4_NL")
OUTPUT_TYPE = {"Q2_K": "Q3_K", "Q3_K_M": "Q4_K"}  # attn_output in other models


def tensor_type(file_type: str, param: str, num_layers: int, num_experts: int, tied: bool,
                gqa: int = 1) -> str | None:
    """The type of Wisp parameter `param` (a linear layer's or the embedding's weight) in a llama.cpp `file_type`
    file, or None where it stays unquantized; gqa: query heads per KV head."""
    if file_type not in FILE_TYPES:
        raise UnsupportedModelError(f"file type {file_type!r} is not one of {', '.join(FILE_TYPES)}")
    if file_type == "MXFP4_MOE" or param.endswith(NOT_QUANTIZED):
        return None
    base = FILE_TYPES[file_type][0]
    output = "Q8_0" if base == "Q8_0" else "Q6_K"
    if param == "lm_head.weight" or (tied and param == "embed_tokens.weight"):
        return output
    if param == "embed_tokens.weight":
        return base
    if param.endswith(("self_attn.v_proj.weight", "self_attn.k_proj.weight")) and num_experts == 8:
        return "Q8_0"
    if param.endswith("self_attn.v_proj.weight"):
        return _value_type(file_type, _layer(param), num_layers, gqa)
    if param.endswith("self_attn.o_proj.weight"):
        if num_experts == 8:
            return "Q5_K" if file_type in EIGHT_EXPERT_OUTPUT else base
        return OUTPUT_TYPE.get(file_type, base)
    if param.endswith("down_proj.weight"):
        return down_type(file_type, _layer(param), num_layers)
    return base


def _value_type(file_type: str, layer: int, num_layers: int, gqa: int) -> str:
    """attn_v's type (llama.cpp counts attn_v tensors; the layer index is that count where every layer attends)."""
    if file_type in ("Q4_K_M", "Q5_K_M") and use_more_bits(layer, num_layers):
        return "Q6_K"
    if file_type == "Q3_K_M":
        return "Q5_K" if layer < 2 else "Q4_K"
    if file_type == "Q2_K":
        return "Q4_K" if gqa >= 4 else "Q3_K"
    if file_type in ("IQ4_XS", "IQ4_NL") and gqa >= 4:
        return "Q5_K"
    return FILE_TYPES[file_type][0]


def dense_types(file_type: str, model, args) -> dict[str, str]:
    """{Wisp parameter: type} of every quantizable weight (engine.quant.dense.quantizable_params) of `model` (a
    meta tree of `args`) that a llama.cpp `file_type` file stores in blocks, after the fallback for its row length."""
    from engine.quant.dense import quantizable_params

    types = {}
    for param, module in quantizable_params(model).items():
        if param == "lm_head.weight" and args.tie_word_embeddings:
            continue
        kind = tensor_type(file_type, param, args.num_hidden_layers, args.num_experts, args.tie_word_embeddings,
                           args.num_attention_heads // max(1, args.num_key_value_heads))
        kind = kind and fallback_type(kind, module.weight.shape[-1])
        if kind is not None and kind != "F16":
            types[param] = kind
    return types
