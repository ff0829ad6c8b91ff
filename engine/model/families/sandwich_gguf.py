"""Gemma 4's language model in llama.cpp's files (its gemma4 architecture, src/models/gemma4.cpp), shared by gemma4
and gemma4_text (the files hold the language model alone, whichever checkpoint it came from):
- metadata: head_count_kv per layer, the full layers' head size under key_length / value_length /
  rope.dimension_count and rope.freq_base, the sliding layers' under the *_swa keys; sliding_window and
  sliding_window_pattern (true for a sliding layer); final_logit_softcapping; embedding_length_per_layer_input 0;
- tensors: the sandwich norms (post_attention_norm, ffn_norm before the dense MLP, post_ffw_norm_1 after it,
  pre_ffw_norm_2 / post_ffw_norm_2 around the experts, post_ffw_norm after both), the router's projection as
  ffn_gate_inp with its input scale ffn_gate_inp.scale, the per-expert scale as ffn_down_exps.scale, the learned
  layer scale as layer_output_scale, the experts' gate and up fused as ffn_gate_up_exps [E, 2I, D]; no attn_v in a
  full layer whose keys are its values;
- rope_freqs: the proportional RoPE of the full layers as llama.cpp computes it, every pair of the head turning with
  frequencies of the whole head size divided by a factor, 1 for the pairs that turn and 1e30 (no turn) for the
  others: written from the model's numbers and read back for the fraction that turns."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.families.gguf_keys import GgufKeys, config_basics
from engine.model.families.tensor_spec import EXPERTS, GATE_UP, TensorSpec, stacked_experts

LAYER_MODULES = {
    "post_attention_layernorm": "post_attention_norm",
    "pre_feedforward_layernorm": "ffn_norm",
    "post_feedforward_layernorm_1": "post_ffw_norm_1",
    "pre_feedforward_layernorm_2": "pre_ffw_norm_2",
    "post_feedforward_layernorm_2": "post_ffw_norm_2",
    "post_feedforward_layernorm": "post_ffw_norm",
    "router.proj": "ffn_gate_inp",
}
LAYER_PARAMS = {"router.scale": "ffn_gate_inp.scale", "router.per_expert_scale": "ffn_down_exps.scale",
                "layer_scalar": "layer_output_scale.weight"}
ROPE_FREQS = "rope_freqs.weight"
NO_TURN = 1e30  # a frequency factor that leaves a pair as it is


def turned_pairs(args: ModelArgs) -> int:
    """The rotary pairs a full layer turns (transformers' proportional RoPE)."""
    sandwich = args.sandwich
    return int(sandwich.full_rope_fraction * sandwich.full_head_dim / 2)


def rope_freqs(args: ModelArgs) -> np.ndarray:
    pairs = args.sandwich.full_head_dim // 2
    return np.array([1.0] * turned_pairs(args) + [NO_TURN] * (pairs - turned_pairs(args)), dtype=np.float32)


def file_tensors(args: ModelArgs) -> list[TensorSpec]:
    return [TensorSpec(ROPE_FREQS, (args.sandwich.full_head_dim // 2,), lambda: rope_freqs(args), keep_f32=True)]


def write_layer_keys(writer, args: ModelArgs) -> None:
    writer.add_feed_forward_length(args.intermediate_size or args.moe_intermediate_size)
    sandwich = args.sandwich
    full = [kind == "full_attention" for kind in args.layer_types]
    writer.add_head_count_kv([sandwich.full_kv_heads if is_full else args.num_key_value_heads for is_full in full])
    writer.add_key_length(sandwich.full_head_dim)
    writer.add_value_length(sandwich.full_head_dim)
    writer.add_key_length_swa(args.head_dim)
    writer.add_value_length_swa(args.head_dim)
    writer.add_rope_dimension_count(sandwich.full_head_dim)
    writer.add_rope_dimension_count_swa(args.head_dim)
    writer.add_rope_freq_base(sandwich.full_rope_theta)
    writer.add_rope_freq_base_swa(sandwich.sliding_rope_theta)
    writer.add_sliding_window(args.attention.sliding_window)
    writer.add_sliding_window_pattern([not is_full for is_full in full])


def write_metadata(writer, args: ModelArgs) -> None:
    writer.add_embedding_length_per_layer_input(0)
    if args.sandwich.logit_softcap:
        writer.add_final_logit_softcapping(args.sandwich.logit_softcap)


def expert_specs(args: ModelArgs, ckpt, names, layer: int) -> list[TensorSpec]:
    """gate and up fused as llama.cpp's converter writes Gemma 4's experts, then down."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    blk = f"blk.{layer}."

    def gate_up() -> np.ndarray:
        return np.concatenate([stacked_experts(args, ckpt, names, layer, "gate"), stacked_experts(args, ckpt, names, layer, "up")],
                              axis=1)

    return [TensorSpec(f"{blk}{GATE_UP}.weight", (E, 2 * I, D), gate_up),
            TensorSpec(f"{blk}{EXPERTS['down']}.weight", (E, D, I), lambda: stacked_experts(args, ckpt, names, layer, "down"))]


def text_config(key: GgufKeys) -> dict:
    """The language model's config.json fields from a file's metadata (sandwich_config reads them)."""
    layers = key.integer("block_count")
    pattern = key.get("attention.sliding_window_pattern")
    kv_heads = key.get("attention.head_count_kv")
    if not isinstance(pattern, list) or len(pattern) != layers or not isinstance(kv_heads, list) \
            or len(kv_heads) != layers:
        raise ModelFormatError(f"{key.path}: {key.arch}.attention.sliding_window_pattern and head_count_kv must "
                               f"list each of the {layers} layers")
    kinds = ["sliding_attention" if sliding else "full_attention" for sliding in pattern]
    sliding_kv = {heads for heads, kind in zip(kv_heads, kinds) if kind == "sliding_attention"}
    full_kv = {heads for heads, kind in zip(kv_heads, kinds) if kind == "full_attention"}
    if len(sliding_kv) != 1 or len(full_kv) != 1:
        raise UnsupportedModelError(f"{key.path}: {key.arch}.attention.head_count_kv {kv_heads}: Wisp's sliding "
                                    "layers share one number of KV heads, and its full layers another")
    first_full = kinds.index("full_attention")
    keys_are_values = not key.has_tensor(f"blk.{first_full}.attn_v.weight")
    if not keys_are_values and full_kv != sliding_kv:
        raise UnsupportedModelError(f"{key.path}: full layers with values of their own and KV heads of their own "
                                    "are not supported")
    full_head_dim = key.integer("attention.key_length")
    factors = np.frombuffer(key.file.raw(key.tensor(ROPE_FREQS).name), dtype=np.float32) \
        if key.tensor(ROPE_FREQS).qtype == 0 else None
    if factors is None or len(factors) != full_head_dim // 2 or not set(factors.tolist()) <= {1.0, np.float32(NO_TURN)}:
        raise UnsupportedModelError(f"{key.path}: rope_freqs must be f32 factors of 1 (the pairs that turn) or 1e30 "
                                    "(the others)")
    return {
        **config_basics(key),
        "num_hidden_layers": layers,
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": sliding_kv.pop(),
        "head_dim": key.integer("attention.key_length_swa"),
        "global_head_dim": full_head_dim,
        "num_global_key_value_heads": full_kv.pop(),
        "attention_k_eq_v": keys_are_values,
        "sliding_window": key.integer("attention.sliding_window"),
        "layer_types": kinds,
        "intermediate_size": key.integer("feed_forward_length"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "num_experts": key.integer("expert_count"),
        "top_k_experts": key.integer("expert_used_count"),
        "enable_moe_block": True,
        "hidden_size_per_layer_input": key.integer("embedding_length_per_layer_input", 0),
        "num_kv_shared_layers": key.integer("attention.shared_kv_layers", 0),
        "final_logit_softcapping": key.get("final_logit_softcapping"),
        "rope_parameters": {
            "full_attention": {"rope_type": "proportional", "rope_theta": key.number("rope.freq_base"),
                               "partial_rotary_factor": 2 * int((factors == 1.0).sum()) / full_head_dim},
            "sliding_attention": {"rope_type": "default", "rope_theta": key.number("rope.freq_base_swa")},
        },
    }


def gguf_format(read_metadata, reads=None):
    """The GgufFormat of a family whose checkpoints hold Gemma 4's language model."""
    from engine.model.families.family import GgufFormat

    extra = {"reads": reads, "refusal": "gemma4_text reads them"} if reads else {}
    return GgufFormat(arch="gemma4", read_metadata=read_metadata, layer_modules=LAYER_MODULES,
                      layer_params=LAYER_PARAMS, check_convertible=check_convertible, write_metadata=write_metadata,
                      write_layer_keys=write_layer_keys, module_order=True, expert_specs=expert_specs,
                      file_tensors=file_tensors, mmproj_projector="gemma4v", **extra)


def check_convertible(args: ModelArgs) -> None:
    """llama.cpp's gemma4 graph runs experts and the dense MLP in every layer."""
    if not all(args.moe_layers):
        raise UnsupportedModelError("llama.cpp's gemma4 files hold experts in every layer")
