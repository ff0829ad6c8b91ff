"""GLM-4.5 / GLM-4.5-Air GGUF files (llama.cpp architecture "glm4moe") on Wisp's engine, and their writing by
`wisp convert-gguf`, as llama.cpp's converter (Glm4MoeModel) and graph (src/models/glm4-moe.cpp) have them.

- Metadata: the DeepSeek-style routing keys (expert_gating_func sigmoid, expert_weights_scale and _norm,
  expert_shared_count, leading_dense_block_count), partial RoPE as rope.dimension_count < head_dim, and
  nextn_predict_layers: block_count counts the multi-token-prediction layers at the end, which Wisp (like
  llama.cpp's generation) does not run.
- Tensors: the norm before the MLP is blk.N.post_attention_norm; the router's correction bias is
  blk.N.exp_probs_b.bias; the shared expert is ffn_{gate,up,down}_shexp; q/k/v biases; leading dense layers hold
  ffn_{gate,up,down}."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.model import glm4_moe
from engine.model.args import ModelArgs

ARCH = "glm4moe"
SIGMOID = 2  # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID
LAYER_MODULES = {
    "post_attention_layernorm": "post_attention_norm",
    "mlp.shared.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared.shared_experts.down_proj": "ffn_down_shexp",
}
def num_layers(file, key) -> int:
    """The layers Wisp runs: block_count less the trailing multi-token-prediction layers."""
    return key.integer("block_count") - key.integer("nextn_predict_layers", 0)


def model_args(file, key, tensor) -> ModelArgs:
    """ModelArgs through the same glm4_moe config reader as a Hugging Face folder, from the file's metadata."""
    gating = key.integer("expert_gating_func", SIGMOID)
    if gating != SIGMOID:
        raise UnsupportedModelError(f"{file.path}: {ARCH}.expert_gating_func {gating}: GLM-4.5 routes with "
                                    f"sigmoid scores ({SIGMOID})")
    head_dim = key.integer("attention.key_length")
    config = {
        "vocab_size": tensor(file, "token_embd.weight").shape[0],
        "hidden_size": key.integer("embedding_length"),
        "num_hidden_layers": num_layers(file, key),
        "num_attention_heads": key.integer("attention.head_count"),
        "num_key_value_heads": key.integer("attention.head_count_kv"),
        "head_dim": head_dim,
        "rms_norm_eps": key.number("attention.layer_norm_rms_epsilon"),
        "rope_theta": key.number("rope.freq_base", 10000.0),
        "max_position_embeddings": key.integer("context_length"),
        "tie_word_embeddings": "output.weight" not in file.tensors,
        "n_routed_experts": key.integer("expert_count"),
        "num_experts_per_tok": key.integer("expert_used_count"),
        "moe_intermediate_size": key.integer("expert_feed_forward_length"),
        "intermediate_size": key.integer("feed_forward_length"),
        "first_k_dense_replace": key.integer("leading_dense_block_count", 0),
        "n_group": key.integer("expert_group_count", 1),
        "topk_group": key.integer("expert_group_used_count", 1),
        "norm_topk_prob": bool(file.get(f"{ARCH}.expert_weights_norm", False)),
        "routed_scaling_factor": key.number("expert_weights_scale", 1.0),
        "n_shared_experts": key.integer("expert_shared_count", 1),
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        "use_qk_norm": "blk.0.attn_q_norm.weight" in file.tensors,
        "partial_rotary_factor": key.integer("rope.dimension_count", head_dim) / head_dim,
    }
    return glm4_moe.model_args(config)


def write_hparams(writer, args: ModelArgs) -> None:
    """The keys beyond the shared ones (engine.gguf.convert.write_hparams), as llama.cpp's converter writes them."""
    import gguf

    writer.add_leading_dense_block_count(args.moe_layers.index(True))
    writer.add_expert_shared_count(args.n_shared_experts)
    writer.add_expert_weights_scale(args.routed_scaling_factor)
    writer.add_expert_weights_norm(args.norm_topk_prob)
    writer.add_expert_gating_func(gguf.ExpertGatingFuncType(SIGMOID))
    writer.add_nextn_predict_layers(0)  # a checkpoint as transformers writes it holds no MTP layer
    if args.n_group > 1:
        writer.add_expert_group_count(args.n_group)
        writer.add_expert_group_used_count(args.topk_group)

