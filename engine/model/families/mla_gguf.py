"""Multi-head latent attention in llama.cpp's files (its deepseek2 architecture, src/models/deepseek2.cpp): the
tensor names of Wisp's MLA modules, kv_b_proj stored split per head into attn_k_b (the key part, transposed:
[H, kv_lora_rank, qk_nope]) and attn_v_b ([H, v_head_dim, kv_lora_rank]) as llama.cpp's converter writes it, and
the attention keys of the metadata (write_layer_keys, mla_config)."""

from __future__ import annotations

import numpy as np

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.families.family import JoinedTensor
from engine.model.families.gguf_keys import GgufKeys

LAYER_MODULES = {
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",  # whole in older files; split into JOINED's parts in llama.cpp's
}


def _heads(args: ModelArgs) -> tuple[int, int, int, int]:
    mla = args.mla
    return args.num_attention_heads, mla.qk_nope_head_dim, mla.v_head_dim, mla.kv_lora_rank


def kv_b_shapes(args: ModelArgs) -> tuple[tuple[int, ...], ...]:
    heads, nope, v, rank = _heads(args)
    return (heads, rank, nope), (heads, v, rank)


def split_kv_b(args: ModelArgs, kv_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """kv_b_proj [H * (nope + v), R] -> (attn_k_b [H, R, nope], attn_v_b [H, v, R])."""
    heads, nope, v, rank = _heads(args)
    per_head = kv_b.reshape(heads, nope + v, rank)
    return np.ascontiguousarray(per_head[:, :nope].transpose(0, 2, 1)), np.ascontiguousarray(per_head[:, nope:])


def join_kv_b(args: ModelArgs, parts: list[np.ndarray]) -> np.ndarray:
    """The inverse of split_kv_b."""
    heads, nope, v, rank = _heads(args)
    k_b, v_b = parts
    return np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1).reshape(heads * (nope + v), rank)


JOINED = {"self_attn.kv_b_proj.weight": JoinedTensor(parts=("attn_k_b.weight", "attn_v_b.weight"),
                                                     shapes=kv_b_shapes, split=split_kv_b, join=join_kv_b)}


def write_layer_keys(writer, args: ModelArgs) -> None:
    """Multi-head latent attention as llama.cpp's files describe it: one key/value head of the compressed cache
    row (key kv_lora_rank + the RoPE part, value kv_lora_rank), and the heads it expands to under *_mla; the q
    LoRA's rank where it has one. (args.head_dim is the RoPE part of a head.)"""
    writer.add_feed_forward_length(args.intermediate_size or args.moe_intermediate_size)
    mla = args.mla
    writer.add_head_count_kv(1)
    writer.add_key_length(mla.kv_lora_rank + args.head_dim)
    writer.add_value_length(mla.kv_lora_rank)
    writer.add_key_length_mla(mla.qk_nope_head_dim + args.head_dim)
    writer.add_value_length_mla(mla.v_head_dim)
    writer.add_rope_dimension_count(args.head_dim)
    writer.add_rope_freq_base(args.rope_theta)
    writer.add_kv_lora_rank(mla.kv_lora_rank)
    if mla.q_lora_rank:
        writer.add_q_lora_rank(mla.q_lora_rank)


def mla_config(key: GgufKeys) -> dict:
    """The config.json fields of the latent attention from a file's metadata: llama.cpp's MLA files give the heads'
    sizes under key_length_mla / value_length_mla (key_length and value_length are the compressed cache row's);
    files without them describe whole heads under key_length / value_length."""
    scaling = key.get("rope.scaling.type")
    if scaling not in (None, "none"):
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{scaling}' ({key.arch}.rope.scaling.type) is not "
                                    f"supported in {key.arch} files yet")
    rope_dim = key.integer("rope.dimension_count")
    mla = key.get("attention.key_length_mla") is not None
    key_length = key.integer("attention.key_length_mla" if mla else "attention.key_length")
    return {
        "kv_lora_rank": key.integer("attention.kv_lora_rank"),
        "q_lora_rank": key.integer("attention.q_lora_rank", 0),
        "qk_rope_head_dim": rope_dim,
        "qk_nope_head_dim": key_length - rope_dim,
        "v_head_dim": key.integer("attention.value_length_mla" if mla else "attention.value_length"),
        "rope_interleave": True,  # llama.cpp's deepseek2 turns adjacent pairs, as DeepSeek-V3's rope_interleave
        "attention_bias": False,
    }


def check_convertible(args: ModelArgs, arch: str) -> None:
    """What llama.cpp's MLA graph fixes: RoPE over adjacent pairs, no attention biases, no RoPE scaling (not
    written yet)."""
    if args.attention.rope_layout != "interleaved":
        raise UnsupportedModelError(f"{args.model_type} with rope_interleave=false: llama.cpp's {arch} graph turns "
                                    "adjacent pairs, so its GGUF would compute a different model")
    if args.attention.attention_bias:
        raise UnsupportedModelError(f"{args.model_type} with attention_bias: llama.cpp's {arch} files have no "
                                    "attention biases")
    if args.rope_scaling is not None:
        raise UnsupportedModelError(f"{args.model_type} with RoPE scaling: convert-gguf does not write the "
                                    f"scaling keys of {arch} files yet")
